#!/usr/bin/env bash
# Measures dagsim's TCP transport against the machine's raw-socket floor and writes
# reports/transports.md with its three SVG plots. Promises: installs only what is missing
# (scripts/deps.sh report: python3-matplotlib for the plots), builds nothing (build first with
# scripts/build.sh), keeps the run's JSON in BUILD_DIR/bench_transports.json.
# Usage: scripts/bench_transports.sh [BUILD_DIR]   (default: build)
# Env: DAGSIM_BENCH_ARGS: extra arguments for dagsim_bench_tcp (e.g. --benchmark_filter=TcpRpc);
#      DAGSIM_BENCH_REPETITIONS (5): repetitions, run interleaved so that load hits every variant alike.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ -d "$build" ] || { echo "bench_transports.sh: no build directory $build (scripts/build.sh)" >&2; exit 1; }
build=$(cd "$build" && pwd)
cd "$root"
bash scripts/deps.sh report
bench="$build/bench/dagsim_bench_tcp"
[ -x "$bench" ] || { echo "bench_transports.sh: no $bench (run scripts/build.sh)" >&2; exit 1; }
# DAGSIM_BENCH_ARGS is split into words on purpose.
# shellcheck disable=SC2086
"$bench" --benchmark_format=json --benchmark_out="$build/bench_transports.json" \
  --benchmark_repetitions=${DAGSIM_BENCH_REPETITIONS:-5} --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=false ${DAGSIM_BENCH_ARGS:-}
/usr/bin/python3 scripts/transport_report.py "$build/bench_transports.json" reports
echo "bench_transports.sh: wrote reports/transports.md from $build/bench_transports.json" >&2
