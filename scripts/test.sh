#!/usr/bin/env bash
# Quick start, command 2: set everything up, build, and run the whole test suite with CTest.
# Scale the property tiers up with DAGSIM_SEEDS=N and RC_PARAMS="max_success=N".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
bash scripts/build.sh
cd build
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
