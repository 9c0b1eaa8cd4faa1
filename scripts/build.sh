#!/usr/bin/env bash
# Installs what is missing (scripts/deps.sh), configures and builds dagsim into build/.
# Usage: scripts/build.sh [TARGET...]  (no target: everything, tests and benchmarks included;
#        scripts/run.sh builds only `dagsim`, which is all the main job needs).
# Env: BUILD_TYPE (default RelWithDebInfo, or what build/ was configured with), DAGSIM_WERROR=ON to
#      fail on warnings (CI sets it; default OFF, or what build/ was configured with: a script that
#      builds on the way, such as bench_pytorch.sh, must not flip it and rebuild every target),
#      JOBS (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# What an existing build/ was configured with, so that leaving a variable unset keeps it.
# (A fresh clone has no cache: nothing to keep, and no failing sed under pipefail.)
cached() {
  [ -f build/CMakeCache.txt ] || return 0
  sed -n "s/^$1:[A-Z]*=//p" build/CMakeCache.txt | head -1
}
build_type=${BUILD_TYPE:-$(cached CMAKE_BUILD_TYPE)}
build_type=${build_type:-RelWithDebInfo}
werror=${DAGSIM_WERROR:-$(cached DAGSIM_WERROR)}
werror=${werror:-OFF}
if [ "${CI:-}" = "true" ]; then werror=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DDAGSIM_WERROR="$werror" >/dev/null
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build build -j "${JOBS:-$(nproc)}" "${targets[@]}"
