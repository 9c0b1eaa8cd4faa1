#!/usr/bin/env python3
"""Renders reports/gpu.md from dagsim_bench_gpu's JSON and, when given, dagsim_bench_tcp's JSON of
its TcpMlpStep benchmarks (scripts/bench_gpu.sh, scripts/gpu_pack.sh).

Every figure is min / median / max over the run's repetitions, which Google Benchmark interleaved
at random, so the cuBLAS baseline and the cuda backend were measured side by side on the same card.
"""
import json
import statistics
import sys
from collections import defaultdict


def iterations(data):
    runs = defaultdict(list)
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        runs[b["run_name"]].append(b)
    return runs


def main(json_path, out_path, tcp_json_path=None):
    data = json.load(open(json_path))
    runs = iterations(data)
    if tcp_json_path:
        runs.update(iterations(json.load(open(tcp_json_path))))
    if not runs:
        sys.exit(f"{json_path}: no benchmark ran (no GPU?): {data['context'].get('gpu')}")

    def stat(name, key, scale=1.0):
        values = sorted(r[key] * scale for r in runs[name])
        return values[0], statistics.median(values), values[-1]

    def fmt(t, digits=1):
        return f"{t[1]:.{digits}f} ({t[0]:.{digits}f}-{t[2]:.{digits}f})"

    ctx = data["context"]
    lines = [
        "# The cuda backend on a GPU",
        "",
        f"Measured on **{ctx.get('gpu')}** ({ctx.get('gpu_sms')} SMs), {ctx.get('date')}, by `scripts/bench_gpu.sh` "
        "(bench/bm_gpu.cc). Each figure is the median of the run's repetitions, with min-max in brackets; "
        "the repetitions of all benchmarks were interleaved at random, so the baseline and the backend "
        "shared the card's state. GPU times come from CUDA events around the GPU work.",
        "",
        "## MLP step against cuBLAS's own gemm (float32, batch 1024)",
        "",
        "`BM_CublasGemm` is one cuBLAS SGEMM of an MLP layer's forward shape ([1024, w] x [w, w]ᵀ). "
        "`BM_CudaMlpStep` is the cuda backend's whole training step of three w-wide layers: forward "
        "(bias, gemm, relu), the MSE loss (a CUB reduction), backward (relu mask, dW, dX, bias sums) and "
        "SGD, on one stream with every activation from the caching allocator. Its throughput counts the "
        "step's gemm FLOPs only, so the ratio says how close the whole step comes to running its gemms "
        "at cuBLAS's rate. The aim is 70% or more at width 4096.",
        "",
        "| width | cuBLAS gemm TFLOP/s | MLP step time (µs) | MLP step gemm TFLOP/s | ratio (medians) |",
        "|---|---|---|---|---|",
    ]
    for w in (256, 512, 1024, 2048, 4096):
        g = f"BM_CublasGemm/width:{w}/manual_time"
        m = f"BM_CudaMlpStep/width:{w}/manual_time"
        if g not in runs or m not in runs:
            continue
        gt, mt = stat(g, "TFLOPs"), stat(m, "gemm_TFLOPs")
        lines.append(f"| {w} | {fmt(gt)} | {fmt(stat(m, 'real_time'), 0)} | {fmt(mt)} | {mt[1] / gt[1]:.0%} |")
    lines += [
        "",
        "## Staging a GPU tensor for an RPC (device to host)",
        "",
        "`BM_CudaStageToHost` is what the RPC agent does per GPU tensor it sends: `to_device(t, cpu)`, "
        "a copy into the pinned staging buffer on the current stream, a fiber-polled wait on its event, "
        "and a copy into a fresh host tensor. `BM_CudaMemcpyToPinned` is the floor: one "
        "`cudaMemcpyAsync` into pinned memory and a wait.",
        "",
        "| bytes | stage to host (µs) | memcpy to pinned (µs) | ratio (medians) |",
        "|---|---|---|---|",
    ]
    for n in (64, 1 << 20, 64 << 20):
        s, p = f"BM_CudaStageToHost/bytes:{n}", f"BM_CudaMemcpyToPinned/bytes:{n}"
        if s not in runs or p not in runs:
            continue
        st, pt = stat(s, "real_time"), stat(p, "real_time")
        lines.append(f"| {n} | {fmt(st)} | {fmt(pt)} | {st[1] / pt[1]:.1f}x |")
    lines += [
        "",
        "Past a few kilobytes, staging costs more than the transfer itself. The GPU's part is the same "
        "`cudaMemcpyAsync`. The floor does not pay for two things: the second copy, from the pinned "
        "buffer into the host tensor, and the first touch of that tensor's fresh pages. These are the "
        "likely causes, but they were not profiled. Copying straight into a pinned host tensor, which "
        "the wire could then send from, would remove both.",
        "",
        "## Long rows: a thread per row against a warp per row (float32)",
        "",
        "`BM_CudaLogSoftmax` (64 rows) and `BM_CudaLayerNorm` (512 rows) run the line kernel alone on "
        "device buffers. `warps:0` is one thread per row, the line functor; `warps:1` is what the cuda "
        "backend runs for rows of 32 elements or more: a warp per row, adding in lane order, so both "
        "give the same bits (`CudaGpu.LaneOrderWarpsGiveTheOneThreadFunctorsBits`).",
        "",
    ]
    warp_rows = []
    for name, arg, sizes in (("log_softmax", "classes", (1024, 32768)), ("layer_norm", "width", (1024, 4096))):
        bench = "BM_CudaLogSoftmax" if name == "log_softmax" else "BM_CudaLayerNorm"
        for n in sizes:
            t, w = f"{bench}/{arg}:{n}/warps:0/manual_time", f"{bench}/{arg}:{n}/warps:1/manual_time"
            if t in runs and w in runs:
                tt, wt = stat(t, "real_time"), stat(w, "real_time")
                warp_rows.append(f"| {name} | {n} | {fmt(tt)} | {fmt(wt)} | {tt[1] / wt[1]:.1f}x |")
    if warp_rows:
        lines += ["| op | row length | thread per row (µs) | warp per row (µs) | speedup (medians) |",
                  "|---|---|---|---|---|"]
        lines += warp_rows
    else:
        lines += ["Not measured in this run."]
    lines += [
        "",
        "## The distributed MLP step over TCP: GPU workers against CPU workers (one host)",
        "",
        "bench/bm_transports.cc, in one run with the repetitions interleaved: two processes over "
        "loopback TCP (trusted network), the 8-layer MLP of width 256 and batch 64, every other layer "
        "on the second process. `BM_TcpMlpStep` runs it on the CPUs; `BM_TcpMlpStepOnGpus` on each "
        "process's GPU through the kernel table, with device maps cuda:0 to cuda:0 (each RPC stages its "
        "tensor to the host and back onto the other GPU), ending when the first process has read a "
        "gradient value back (the GPUs' queued work inside the time).",
        "",
    ]
    tcp_rows = []
    for dtype, flag in (("float32", 1), ("float64", 0)):
        c, g = f"BM_TcpMlpStep/1/float32:{flag}/real_time", f"BM_TcpMlpStepOnGpus/cuda:1/float32:{flag}/real_time"
        if c in runs and g in runs:
            ct, gt = stat(c, "real_time"), stat(g, "real_time")
            tcp_rows.append(f"| {dtype} | {fmt(ct, 2)} | {fmt(gt, 2)} | {gt[1] / ct[1]:.2f}x |")
    if tcp_rows:
        lines += ["| dtype | CPU workers (ms) | GPU workers (ms) | GPU / CPU (medians) |", "|---|---|---|---|"]
        lines += tcp_rows + [""]
    else:
        lines += ["Not measured in this run (no GPU run of dagsim_bench_tcp's TcpMlpStep benchmarks).", ""]
    open(out_path, "w").write("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
