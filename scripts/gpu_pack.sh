#!/usr/bin/env bash
# The GPU checks of issue 27 on a machine that has a GPU but not this project's dependencies (the
# lent device machines have the CUDA driver and toolkit, and no Boost, OpenBLAS or oneDNN): build
# here, carry the binaries with every shared library they load that is neither the C runtime's
# nor the toolkit's (carry .gpu/pack.tar.xz), run there.
#
#   scripts/gpu_pack.sh pack         builds, writes .gpu/pack.tar.xz (the folder is git-ignored)
#   scripts/gpu_pack.sh run OUT      on the GPU machine, from the repository root: unpacks into
#                                    /tmp/gpupack, runs the cuda tests, the GPU examples with real
#                                    GPUs in the simulator and over TCP, and the GPU benchmarks
#                                    (bm_gpu.cc; the distributed MLP step over TCP on GPUs beside
#                                    the same on CPUs); writes OUT/cuda_gpu_test.xml,
#                                    OUT/examples.txt, OUT/gpu.json, OUT/tcp_gpu.json
#
# Without a GPU `run` still runs, and every check says it was skipped and why.
set -euo pipefail
cd "$(dirname "$0")/.."

binaries=(build/dagsim build/compute/cuda_gpu_test build/bench/dagsim_bench_gpu build/bench/dagsim_bench_tcp
          build/bench/dagsim_bench_peer)

case "${1:-}" in
  pack)
    bash scripts/build.sh dagsim cuda_gpu_test dagsim_bench_gpu dagsim_bench_tcp dagsim_bench_peer
    for b in "${binaries[@]}"; do
      [ -x "$b" ] || { echo "gpu_pack: no $b (is nvcc installed? docs/devices.md)" >&2; exit 1; }
    done
    stage=$(mktemp -d)
    mkdir -p "$stage/bin" "$stage/lib"
    for b in "${binaries[@]}"; do
      strip -o "$stage/bin/$(basename "$b")" "$b"
      # Every library the binary loads, but the C runtime's, the dynamic loader's and the CUDA
      # Toolkit's (cuBLAS is hundreds of MiB; the GPU machine has the toolkit).
      ldd "$b" | awk '$3 ~ /^\// { print $3 }' | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so|/cuda' |
        while read -r lib; do cp -Lu "$lib" "$stage/lib/"; done
    done
    mkdir -p .gpu
    tar -C "$stage" -cJf .gpu/pack.tar.xz bin lib
    rm -rf "$stage"
    ls -l .gpu/pack.tar.xz
    ;;
  run)
    out="${2:?gpu_pack.sh run OUT}"
    mkdir -p "$out" /tmp/gpupack
    tar -C /tmp/gpupack -xJf .gpu/pack.tar.xz
    cuda_lib=$(ls -d /usr/local/cuda*/targets/x86_64-linux/lib 2>/dev/null | head -1)
    export LD_LIBRARY_PATH="/tmp/gpupack/lib${cuda_lib:+:$cuda_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/card.txt" 2>&1 || true
    # Where cuBLAS and the driver come from (the cuda backend dlopens cuBLAS of the toolkit's major
    # version when a GPU starts; the runtime is linked statically): the first thing to read if
    # every cuda test fails at once.
    { echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ls -d /usr/local/cuda*; ls "${cuda_lib:-/nonexistent}"/libcublas*;
      ldconfig -p | grep -E 'libcublas|libcuda\.so'; } > "$out/libs.txt" 2>&1 || true
    status=0
    /tmp/gpupack/bin/cuda_gpu_test --gtest_output="xml:$out/cuda_gpu_test.xml" || status=1
    {
      for example in scenarios/examples/gpu_*.toml; do
        for transport in sim tcp; do
          echo "== $example --transport $transport --gpus cuda"
          /tmp/gpupack/bin/dagsim run "$example" --seed 42 --gpus cuda --transport "$transport" || status=1
        done
      done
    } > "$out/examples.txt" 2>&1
    cat "$out/examples.txt"
    /tmp/gpupack/bin/dagsim_bench_gpu --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
      --benchmark_min_time=0.2 --benchmark_out="$out/gpu.json" --benchmark_out_format=json || status=1
    DAGSIM_BENCH_PEER=/tmp/gpupack/bin/dagsim_bench_peer /tmp/gpupack/bin/dagsim_bench_tcp \
      --benchmark_filter='TcpMlpStep' --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
      --benchmark_min_time=0.2 --benchmark_out="$out/tcp_gpu.json" --benchmark_out_format=json || status=1
    exit "$status"
    ;;
  *)
    sed -n 2,12p "$0" >&2
    exit 2
    ;;
esac
