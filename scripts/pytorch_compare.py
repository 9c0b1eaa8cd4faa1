#!/usr/bin/python3
"""dagsim beside PyTorch, measured in one run: writes reports/performance.md and its JSON.

Usage: pytorch_compare.py BUILD_DIR OUT_DIR [--rounds N] [--seconds S]
(scripts/bench_pytorch.sh installs what it needs and calls this.)

Promises:
- Every ratio comes from this run. Each round runs, per group (local compute; two processes over
  TCP), dagsim's benchmarks and PyTorch's counterparts (scripts/pytorch_counterparts.py) back to
  back, the order alternating round by round so drift in the machine's speed falls on both sides.
  A round's ratio is dagsim's time over PyTorch's in that round; the report gives each ratio's
  min, median and max over the rounds, and each side's times the same way.
- Ratios to the raw-socket floor (RPC round trip against raw ping-pong, tensor stream against raw
  loopback) are taken within a round too.
- Both sides run with the same allocator tuning (glibc's mmap threshold at 64 MiB, as the dagsim
  binary and benchmarks set it with mallopt): without it, PyTorch's MLP step maps and unmaps its
  gradient buffers on every iteration and runs about 4x slower, which measures glibc, not PyTorch.
- It records the machine (CPU model, cores, load average before and after) and the versions.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
TUNABLES = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456"

# (label, dagsim key, PyTorch key or None, aim as (text, predicate on the median ratio))
LOCAL = [
    ("Local MLP step, float32", "BM_MlpLocal/float32:1", ("<= 0.8x PyTorch", lambda q: q <= 0.8)),
    ("Local MLP step, float64", "BM_MlpLocal/float32:0", ("<= 0.8x PyTorch", lambda q: q <= 0.8)),
    ("gemm 256x256x256, float32", "BM_GemmOurs/n:256", None),
    ("Engine: backward through 10,000 adds", "BM_EngineChain/ops:10000", None),
    ("Embedding 4096 of 8192x256 + backward, float32", "BM_EmbeddingOurs/width:256", None),
    ("cross_entropy 64x8192 + backward, float32", "BM_CrossEntropyOurs/classes:8192", None),
    ("layer_norm 512x1024 + backward, float32", "BM_LayerNormOurs/width:1024", None),
    ("max over dim 1 of 64x8192 + backward, float32", "BM_MaxOverDimOurs/width:8192", None),
]
TCP = [
    ("RPC round trip, 64 B", "BM_TcpRpc/64/0", ("<= 0.25x PyTorch (4x faster)", lambda q: q <= 0.25)),
    ("RPC round trip, 1 MiB", "BM_TcpRpc/1048576/0", None),
    ("Seed example step", "BM_TcpSeedStep/0", ("<= 0.25x PyTorch (4x faster)", lambda q: q <= 0.25)),
    ("MLP step over TCP, float32", "BM_TcpMlpStep/0/float32:1", ("<= 0.7x PyTorch", lambda q: q <= 0.7)),
    ("MLP step over TCP, float64", "BM_TcpMlpStep/0/float32:0", None),
]
FLOOR = [  # (label, dagsim key, raw key, kind, aim)
    ("RPC round trip 1 MiB / raw ping-pong", "BM_TcpRpc/1048576/0", "BM_RawPingPong/1048576", "time",
     ("<= 1.5x raw", lambda q: q <= 1.5)),
    ("RPC round trip 64 B / raw ping-pong", "BM_TcpRpc/64/0", "BM_RawPingPong/64", "time", None),
    ("1 MiB tensor stream / raw loopback", "BM_TcpStream/1048576/0", "BM_RawStream/1048576", "bandwidth",
     (">= 80% of raw", lambda q: q >= 0.8)),
]
GROUPS = {
    "local": ("bench/dagsim_bench", [k for _, k, _ in LOCAL]),
    "tcp": ("bench/dagsim_bench_tcp", [k for _, k, _ in TCP] + [f[2] for f in FLOOR] + ["BM_TcpStream/1048576/0"]),
}


def regex_of(keys):
    return "|".join("^" + k.replace(".", "\\.") + "(/real_time)?$" for k in sorted(set(keys)))


def run_ours(build, group, seconds):
    binary, keys = GROUPS[group]
    out = subprocess.run([os.path.join(build, binary), f"--benchmark_filter={regex_of(keys)}",
                          f"--benchmark_min_time={seconds}", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("error_occurred"):
            raise SystemExit(f"pytorch_compare: {b['name']} failed: {b.get('error_message')}")
        key = b["name"].removesuffix("/real_time")
        result[key] = {"time": b["real_time"] * UNIT_S[b["time_unit"]], "bytes_per_second": b.get("bytes_per_second")}
    missing = [k for k in keys if k not in result]
    if missing:
        raise SystemExit(f"pytorch_compare: dagsim benchmarks missing from the run: {missing}")
    return result


def run_torch(group, seconds, blas_free=False):
    env = dict(os.environ, GLIBC_TUNABLES=TUNABLES)
    if blas_free:
        env.pop("OPENBLAS_CORETYPE", None)
    out = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "pytorch_counterparts.py"), group,
                          str(seconds)], check=True, capture_output=True, text=True, env=env, timeout=600).stdout
    return {j["key"]: {"time": j["seconds_per_iter"]} for j in map(json.loads, out.splitlines())}


def dagsim_provenance(build):
    """What `dagsim run --json` says of its build: BLAS, its kernels, the CPU capability."""
    out = subprocess.run([os.path.join(build, "dagsim"), "run", os.path.join(ROOT, "scenarios/examples/seed_example.toml"),
                          "--json"], capture_output=True, text=True).stdout
    try:
        return json.loads(out)["provenance"]
    except (ValueError, KeyError):
        return {}


def spread(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def fmt_t(s):
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3)):
        if abs(s) < 1000 * scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"


def fmt_spread(d, f):
    return f"{f(d['median'])} ({f(d['min'])} to {f(d['max'])})"


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        raise SystemExit("usage: pytorch_compare.py BUILD_DIR OUT_DIR [--rounds N] [--seconds S]")
    build, out_dir = os.path.abspath(args[0]), args[1]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 5
    seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else 1.0
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    samples = {"ours": {}, "torch": {}, "torch_blas_free": {}}
    for r in range(rounds):
        for group in GROUPS:
            order = [("ours", lambda g=group: run_ours(build, g, seconds)), ("torch", lambda g=group: run_torch(g, seconds))]
            if group == "local" and os.environ.get("OPENBLAS_CORETYPE"):
                # Context, not a ratio's denominator: PyTorch with OpenBLAS free to pick its kernels.
                order.append(("torch_blas_free", lambda g=group: run_torch(g, seconds, blas_free=True)))
            if r % 2 == 1:
                order.reverse()
            for side, run in order:
                print(f"pytorch_compare: round {r + 1}/{rounds}, {group}, {side}", file=sys.stderr, flush=True)
                for key, row in run().items():
                    samples[side].setdefault(key, []).append(row)
    load_after = os.getloadavg()

    def times(side, key):
        return [row["time"] for row in samples[side].get(key, [])]

    rows = []
    for label, key, aim in LOCAL + TCP:
        ours, theirs = times("ours", key), times("torch", key)
        ratios = [a / b for a, b in zip(ours, theirs)]
        q = spread(ratios)
        free = times("torch_blas_free", key)
        rows.append({"measure": label, "dagsim_key": key, "dagsim_s": spread(ours), "pytorch_s": spread(theirs),
                     "pytorch_blas_free_s": spread(free) if free else None,
                     "ratio": q, "aim": aim[0] if aim else None,
                     "verdict": None if aim is None else ("meets" if aim[1](q["median"]) else "misses")})
    floors = []
    for label, key, raw, kind, aim in FLOOR:
        if kind == "time":
            ratios = [a / b for a, b in zip(times("ours", key), times("ours", raw))]
        else:
            ratios = [a["bytes_per_second"] / b["bytes_per_second"]
                      for a, b in zip(samples["ours"][key], samples["ours"][raw])]
        q = spread(ratios)
        floors.append({"measure": label, "ratio": q, "aim": aim[0] if aim else None,
                       "verdict": None if aim is None else ("meets" if aim[1](q["median"]) else "misses")})
    torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_before": load_before, "load_after": load_after,
               "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "dagsim_provenance": dagsim_provenance(build),
               "started": started, "rounds": rounds, "seconds_per_benchmark": seconds, "pytorch": torch_version,
               "kernel": platform.release()}
    doc = {"machine": machine, "pytorch": rows, "floor": floors, "samples": samples}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "performance.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out_dir, "performance.md"), "w") as f:
        f.write(markdown(doc))


def markdown(doc):
    m = doc["machine"]
    out = ["# dagsim beside PyTorch, measured in one run", "",
           f"Generated by `scripts/bench_pytorch.sh` (`scripts/pytorch_compare.py`) on {m['started']}: "
           f"{m['rounds']} rounds, each running dagsim's benchmark and PyTorch {m['pytorch']}'s counterpart "
           f"(`scripts/pytorch_counterparts.py`) back to back, the order alternating by round, "
           f"{m['seconds_per_benchmark']} s per benchmark. A ratio is dagsim's time over PyTorch's **in the "
           "same round**; each cell gives the median over the rounds and, in brackets, the min to max. "
           "Times are means per iteration, wall clock, one thread on both sides (our serial OpenBLAS; "
           "`torch.set_num_threads(1)`), both with glibc's mmap threshold at 64 MiB. PyTorch's RPC is "
           "TensorPipe on loopback; dagsim's is its TCP transport with MACs on (PyTorch authenticates "
           "nothing). No figure here comes from another run.", "",
           "## Against PyTorch", "",
           "| Measure | dagsim | PyTorch | ratio (dagsim / PyTorch) | aim | verdict |", "|---|---|---|---|---|---|"]
    for r in doc["pytorch"]:
        ratio = f"{r['ratio']['median']:.2f}x ({r['ratio']['min']:.2f} to {r['ratio']['max']:.2f})"
        out.append(f"| {r['measure']} | {fmt_spread(r['dagsim_s'], fmt_t)} | {fmt_spread(r['pytorch_s'], fmt_t)} | "
                   f"{ratio} | {r['aim'] or ''} | {r['verdict'] or ''} |")
    free = [r for r in doc["pytorch"] if r.get("pytorch_blas_free_s")]
    if free:
        p = m.get("dagsim_provenance", {})
        out += ["", f"**Which kernels multiply.** This machine's environment sets `OPENBLAS_CORETYPE="
                f"{m['openblas_coretype']}`, so OpenBLAS (PyTorch's BLAS, and dagsim's for float64) runs those "
                f"kernels. dagsim's float32 products run on oneDNN's sgemm, which picks the CPU's widest kernels "
                f"itself (AVX-512 here); dagsim's elementwise path is `{p.get('cpu_capability', '?')}`. Part of "
                "the float32 lead is therefore kernels, not overhead. For context only (no ratio above uses it), "
                "PyTorch in the same rounds with `OPENBLAS_CORETYPE` unset, so OpenBLAS picks its kernels for "
                "this CPU:", "",
                "| Measure | PyTorch, OpenBLAS free | dagsim / that |", "|---|---|---|"]
        for r in free:
            key = r["dagsim_key"]
            q = spread([a["time"] / b["time"] for a, b in zip(doc["samples"]["ours"][key],
                                                               doc["samples"]["torch_blas_free"][key])])
            out.append(f"| {r['measure']} | {fmt_spread(r['pytorch_blas_free_s'], fmt_t)} | "
                       f"{q['median']:.2f}x ({q['min']:.2f} to {q['max']:.2f}) |")
    out += ["", "## Against the raw-socket floor (same run)", "",
            "| Measure | ratio | aim | verdict |", "|---|---|---|---|"]
    for r in doc["floor"]:
        q = r["ratio"]
        out.append(f"| {r['measure']} | {q['median']:.2f} ({q['min']:.2f} to {q['max']:.2f}) | {r['aim'] or ''} | "
                   f"{r['verdict'] or ''} |")
    out += ["", "Rendezvous formation and re-formation over TCP, beside PyTorch's c10d rendezvous run for run, "
            "are in [rendezvous_tcp.md](rendezvous_tcp.md), which `scripts/bench_pytorch.sh` regenerates after "
            "this report (with [transports.md](transports.md)).", "",
            "## Machine", "",
            f"{m['cpu']}, {m['cores']} cores, Linux {m['kernel']}; load average (1, 5, 15 min) "
            f"{', '.join(f'{x:.2f}' for x in m['load_before'])} before and "
            f"{', '.join(f'{x:.2f}' for x in m['load_after'])} after. Every sample is in `performance.json`.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    main()
