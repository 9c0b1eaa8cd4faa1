#!/usr/bin/env bash
# dagsim beside PyTorch in one run: builds dagsim (scripts/build.sh), installs PyTorch (Debian's
# python3-torch, through scripts/deps.sh test), then alternates dagsim's benchmarks with PyTorch's
# counterparts round by round and writes reports/performance.md and reports/performance.json
# (scripts/pytorch_compare.py says what is measured and how). Then regenerates the transports report
# (scripts/bench_transports.sh), so both reports come from this machine and this build.
# Usage: scripts/bench_pytorch.sh [--rounds N] [--seconds S]   (defaults: 5 rounds, 1 s each)
# Env: BUILD_DIR (default: build). DAGSIM_SKIP_TRANSPORTS=1 leaves reports/transports.md alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-$root/build}
bash scripts/deps.sh test
bash scripts/build.sh
/usr/bin/python3 scripts/pytorch_compare.py "$build" reports "$@"
echo "bench_pytorch.sh: wrote reports/performance.md" >&2
if [ "${DAGSIM_SKIP_TRANSPORTS:-0}" != 1 ]; then
  bash scripts/bench_transports.sh "$build"
fi
