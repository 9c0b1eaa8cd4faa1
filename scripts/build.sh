#!/usr/bin/env bash
# Installs what is missing (scripts/deps.sh), configures and builds dagsim into build/.
# Env: BUILD_TYPE (default RelWithDebInfo), DAGSIM_WERROR=ON to fail on warnings (CI sets it),
#      JOBS (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build_type=${BUILD_TYPE:-RelWithDebInfo}
werror=${DAGSIM_WERROR:-OFF}
if [ "${CI:-}" = "true" ]; then werror=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DDAGSIM_WERROR="$werror" >/dev/null
cmake --build build -j "${JOBS:-$(nproc)}"
