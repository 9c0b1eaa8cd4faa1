#!/usr/bin/env bash
# dagsim beside PyTorch in one run: builds dagsim (scripts/build.sh), installs PyTorch (Debian's
# python3-torch, through scripts/deps.sh test), then alternates dagsim's benchmarks with PyTorch's
# counterparts round by round and writes reports/performance.md and reports/performance.json
# (scripts/pytorch_compare.py says what is measured and how). Then regenerates the transports report
# (scripts/bench_transports.sh) and rendezvous formation and re-formation over TCP beside PyTorch's
# c10d rendezvous, run for run (scripts/bench_rendezvous_tcp.sh: reports/rendezvous_tcp.md), so
# every report comes from this machine and this build. About 20 minutes in all.
# Usage: scripts/bench_pytorch.sh [--rounds N] [--seconds S]   (defaults: 5 rounds, 1 s each)
# Env: BUILD_DIR (default: build). DAGSIM_SKIP_TRANSPORTS=1 leaves reports/transports.md alone,
#      DAGSIM_SKIP_RENDEZVOUS=1 reports/rendezvous_tcp.md; DAGSIM_RDZV_RUNS (default 10) runs per
#      rendezvous case.
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
if [ "${DAGSIM_SKIP_RENDEZVOUS:-0}" != 1 ]; then
  bash scripts/bench_rendezvous_tcp.sh "$build"
fi
