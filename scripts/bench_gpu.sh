#!/usr/bin/env bash
# The cuda backend's benchmarks on this machine's GPU (issue 27): builds dagsim_bench_gpu (needs
# nvcc) and dagsim_bench_tcp, runs the first and the second's TcpMlpStep benchmarks (GPU workers
# beside CPU workers) with interleaved repetitions, keeps the JSON as reports/gpu.json and
# reports/tcp_gpu.json and writes reports/gpu.md (scripts/gpu_report.py). Without a GPU it says
# so and writes nothing.
#   scripts/bench_gpu.sh [REPETITIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
repetitions="${1:-5}"
bash scripts/build.sh dagsim_bench_gpu dagsim_bench_tcp dagsim_bench_peer
binary=build/bench/dagsim_bench_gpu
[ -x "$binary" ] || { echo "bench_gpu: no $binary (is nvcc installed? see docs/devices.md)" >&2; exit 1; }
json=$(mktemp)
"$binary" --benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=0.2 --benchmark_out="$json" --benchmark_out_format=json
tcp_json=$(mktemp)
build/bench/dagsim_bench_tcp --benchmark_filter='TcpMlpStep' --benchmark_repetitions="$repetitions" \
  --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 --benchmark_out="$tcp_json" \
  --benchmark_out_format=json
python3 scripts/gpu_report.py "$json" reports/gpu.md "$tcp_json"
cp "$json" reports/gpu.json
cp "$tcp_json" reports/tcp_gpu.json
rm -f "$json" "$tcp_json"
echo "wrote reports/gpu.md"
