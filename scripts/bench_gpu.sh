#!/usr/bin/env bash
# The cuda backend's benchmarks on this machine's GPU (issue 27): builds dagsim_bench_gpu (needs
# nvcc), runs it with interleaved repetitions, keeps the JSON as reports/gpu.json and writes
# reports/gpu.md (scripts/gpu_report.py). Without a GPU it says so and writes nothing.
#   scripts/bench_gpu.sh [REPETITIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
repetitions="${1:-5}"
bash scripts/build.sh dagsim_bench_gpu
binary=build/bench/dagsim_bench_gpu
[ -x "$binary" ] || { echo "bench_gpu: no $binary (is nvcc installed? see docs/devices.md)" >&2; exit 1; }
json=$(mktemp)
"$binary" --benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=0.2 --benchmark_out="$json" --benchmark_out_format=json
python3 scripts/gpu_report.py "$json" reports/gpu.md
cp "$json" reports/gpu.json
rm -f "$json"
echo "wrote reports/gpu.md"
