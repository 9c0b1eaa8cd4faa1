#!/usr/bin/env bash
# dagsim beside PyTorch in one run: builds dagsim (scripts/build.sh), installs PyTorch (Debian's
# python3-torch, through scripts/deps.sh test) and matplotlib (scripts/deps.sh report), then
# alternates dagsim's benchmarks with PyTorch's counterparts round by round and writes
# reports/performance.md, reports/performance.json and the growth plots reports/performance_*.svg
# (scripts/pytorch_compare.py and scripts/performance_growth.py say what is measured and how: the
# compute and TCP rows beside PyTorch, the raw-socket floor, the dagsim-only aims of the simulator
# and the simulated rendezvous up to 10,000 nodes, and how cost grows with nodes, payload and width).
# Then regenerates the transports report (scripts/bench_transports.sh) and rendezvous formation and
# re-formation over TCP beside PyTorch's c10d rendezvous, run for run (scripts/bench_rendezvous_tcp.sh:
# reports/rendezvous_tcp.md), so every report comes from this machine and this build.
# Usage: scripts/bench_pytorch.sh [--quick] [--rounds N] [--seconds S] [--out DIR]
#   defaults: 5 rounds, 1 s per benchmark, DIR = reports.
#   --quick: a smoke test of this report's pipeline in a couple of minutes (1 round, 0.05 s per
#            benchmark, fewer sweep sizes, no 10,000-node rendezvous); it writes into DIR or, by
#            default, a new temporary folder (never reports/), and skips the transports and
#            rendezvous_tcp reports (they write into reports/).
# Env: BUILD_DIR (default: build). DAGSIM_SKIP_BUILD=1 uses BUILD_DIR as it is (no deps.sh, no
#      build.sh). DAGSIM_SKIP_TRANSPORTS=1 leaves reports/transports.md alone,
#      DAGSIM_SKIP_RENDEZVOUS=1 reports/rendezvous_tcp.md; DAGSIM_RDZV_RUNS (default 10) runs per
#      rendezvous case. DAGSIM_BENCH_TIMEOUT and DAGSIM_RDZV_TIMEOUT: see scripts/pytorch_compare.py.
# A full run takes about 30 to 40 minutes on 2 cores: this report about 12 (5 rounds of about 140 s),
# plus up to 10 while the 4,096- and 10,000-node formations outlast their 300 s limit (each is then
# given up after its first round), then the transports and rendezvous_tcp reports. --quick: about
# 1 minute for this report alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-$root/build}
out=""
quick=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --quick) quick=1; args+=("$1"); shift ;;
    --rounds | --seconds) args+=("$1" "$2"); shift 2 ;;
    *) echo "usage: scripts/bench_pytorch.sh [--quick] [--rounds N] [--seconds S] [--out DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "$out" ]; then
  if [ "$quick" = 1 ]; then out=$(mktemp -d -t dagsim-perf-quick.XXXXXX); else out=reports; fi
fi
if [ "${DAGSIM_SKIP_BUILD:-0}" != 1 ]; then
  bash scripts/deps.sh test
  bash scripts/deps.sh report
  if [ "$quick" = 1 ]; then
    bash scripts/build.sh dagsim dagsim_bench dagsim_bench_tcp dagsim_bench_peer dagsim_bench_rendezvous
  else
    bash scripts/build.sh
  fi
fi
/usr/bin/python3 scripts/pytorch_compare.py "$build" "$out" "${args[@]}"
echo "bench_pytorch.sh: wrote $out/performance.md" >&2
if [ "$quick" = 1 ]; then
  echo "bench_pytorch.sh: --quick: transports and rendezvous_tcp reports not regenerated" >&2
  exit 0
fi
if [ "${DAGSIM_SKIP_TRANSPORTS:-0}" != 1 ]; then
  bash scripts/bench_transports.sh "$build"
fi
if [ "${DAGSIM_SKIP_RENDEZVOUS:-0}" != 1 ]; then
  bash scripts/bench_rendezvous_tcp.sh "$build"
fi
