#!/usr/bin/python3
"""dagsim beside PyTorch, measured in one run: writes reports/performance.md, its JSON and plots.

Usage: pytorch_compare.py BUILD_DIR OUT_DIR [--rounds N] [--seconds S] [--quick]
  --quick  a smoke test of the whole pipeline in a few minutes: 1 round, 0.05 s per benchmark,
           fewer sweep sizes, no 10,000-node rendezvous (explicit --rounds/--seconds still win).
           Its figures are not to be quoted; the report says it was a quick run.
Env: DAGSIM_BENCH_TIMEOUT (s, default 1200): limit on one benchmark process; DAGSIM_RDZV_TIMEOUT
     (s, default 300, 60 with --quick): limit on one simulated rendezvous formation (three times
     that from 4,096 nodes, which run in the first round only: scripts/performance_growth.py).
(scripts/bench_pytorch.sh installs what it needs and calls this.)

Promises:
- Every ratio comes from this run. Each round runs, per group (local compute; the MLP width
  sweep; two processes over TCP), dagsim's benchmarks and PyTorch's counterparts
  (scripts/pytorch_counterparts.py) back to back, the order alternating round by round so drift
  in the machine's speed falls on both sides.
  A round's ratio is dagsim's time over PyTorch's in that round; the report gives each ratio's
  min, median and max over the rounds, and each side's times the same way.
- Ratios to the raw-socket floor (RPC round trip against raw ping-pong, tensor stream against raw
  loopback) are taken within a round too.
- The same rounds run the dagsim-only benchmarks (simulator, simulated rendezvous) and the growth
  sweeps; scripts/performance_growth.py defines those rows, tables and plots.
- A benchmark this build lacks, or one that times out, is a row saying "not measured (...)"; a
  benchmark that fails is that too, and the script then exits 1 after writing the report.
- Both sides run with the same allocator tuning (glibc's mmap threshold at 64 MiB, as the dagsim
  binary and benchmarks set it with mallopt): without it, PyTorch's MLP step maps and unmaps its
  gradient buffers on every iteration and runs about 4x slower, which measures glibc, not PyTorch.
- It records the machine (CPU model, cores, load average before and after) and the versions.
"""
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import performance_growth as growth  # noqa: E402
from performance_growth import fmt_spread, fmt_t, not_measured, ratio_spread, run_bench, spread  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUNABLES = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456"
STREAM_64M = "BM_TcpStream/67108864/0"

# (label, dagsim key, aim as (text, predicate on the median ratio))
LOCAL = [
    ("Local MLP step, float32", "BM_MlpLocal/float32:1", ("<= 0.8x PyTorch", lambda q: q <= 0.8)),
    ("Local MLP step, float64", "BM_MlpLocal/float32:0", ("<= 0.8x PyTorch", lambda q: q <= 0.8)),
    ("gemm 256x256x256, float32", "BM_GemmOurs/n:256", None),
    ("Engine: backward through 10,000 adds", "BM_EngineChain/ops:10000", None),
    ("Embedding 4096 of 8192x256 + backward, float32", "BM_EmbeddingOurs/width:256", None),
    ("cross_entropy 64x8192 + backward, float32", "BM_CrossEntropyOurs/classes:8192", None),
    ("layer_norm 512x1024 + backward, float32", "BM_LayerNormOurs/width:1024",
     ("<= 0.8x PyTorch", lambda q: q <= 0.8)),
    ("max over dim 1 of 64x8192 + backward, float32", "BM_MaxOverDimOurs/width:8192", None),
]
TCP = [
    ("RPC round trip, 64 B", "BM_TcpRpc/64/0", ("<= 0.25x PyTorch (4x faster)", lambda q: q <= 0.25)),
    ("RPC round trip, 1 MiB", "BM_TcpRpc/1048576/0", ("<= 0.8x PyTorch", lambda q: q <= 0.8)),
    ("Seed example step", "BM_TcpSeedStep/0", ("<= 0.25x PyTorch (4x faster)", lambda q: q <= 0.25)),
    ("MLP step over TCP, float32", "BM_TcpMlpStep/0/float32:1", ("<= 0.7x PyTorch", lambda q: q <= 0.7)),
    ("MLP step over TCP, float64", "BM_TcpMlpStep/0/float32:0", None),
]
FLOOR = [  # (label, dagsim key, raw key, kind, aim)
    ("RPC round trip 1 MiB / raw ping-pong", "BM_TcpRpc/1048576/0", "BM_RawPingPong/1048576", "time",
     ("<= 1.2x raw", lambda q: q <= 1.2)),
    ("RPC round trip 64 B / raw ping-pong", "BM_TcpRpc/64/0", "BM_RawPingPong/64", "time", None),
    ("1 MiB tensor stream / raw loopback", "BM_TcpStream/1048576/0", "BM_RawStream/1048576", "bandwidth",
     (">= 80% of raw", lambda q: q >= 0.8)),
    ("64 MiB tensor stream / raw loopback", STREAM_64M, "BM_RawStream/67108864", "bandwidth",
     (">= 90% of raw", lambda q: q >= 0.9)),
]
RPC_COUNTERPART_SIZES = (64, 1 << 20)  # TCP's rows; the growth sweep adds its own


def groups(sweep):
    """name: (dagsim binary, dagsim keys, pytorch_counterparts.py's arguments)."""
    tcp_sizes = sorted(set(RPC_COUNTERPART_SIZES) | set(sweep.rpc_sizes))
    return {
        "local": ("bench/dagsim_bench", [k for _, k, _ in LOCAL], ["local"]),
        "mlp_width": ("bench/dagsim_bench", sweep.mlp_keys(), ["mlp_width"]),
        "tcp": ("bench/dagsim_bench_tcp", [k for _, k, _ in TCP] + [f[1] for f in FLOOR] + [f[2] for f in FLOOR]
                + sweep.rpc_keys(), ["tcp", "--sizes", ",".join(map(str, tcp_sizes))]),
    }


def run_torch(args, seconds, blas_free=False):
    env = dict(os.environ, GLIBC_TUNABLES=TUNABLES)
    if blas_free:
        env.pop("OPENBLAS_CORETYPE", None)
    argv = ["/usr/bin/python3", os.path.join(ROOT, "scripts", "pytorch_counterparts.py"), args[0], str(seconds),
            *args[1:]]
    try:
        out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env, timeout=1200).stdout
    except subprocess.CalledProcessError as e:
        return {}, {f"pytorch_counterparts.py {args[0]}": f"failed: exit {e.returncode}: {e.stderr.strip()[-300:]}"}
    except subprocess.TimeoutExpired:
        return {}, {f"pytorch_counterparts.py {args[0]}": "failed: timed out after 1200 s"}
    rows = map(json.loads, out.splitlines())
    return {j["key"]: {"time": j["seconds_per_iter"], "iterations": j["iterations"]} for j in rows}, {}


def dagsim_provenance(build):
    """What `dagsim run --json` says of its build: BLAS, its kernels, the CPU capability."""
    out = subprocess.run([os.path.join(build, "dagsim"), "run", os.path.join(ROOT, "scenarios/examples/seed_example.toml"),
                          "--json"], capture_output=True, text=True).stdout
    try:
        return json.loads(out)["provenance"]
    except (ValueError, KeyError):
        return {}


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def options(args):
    if len(args) < 2 or args[0].startswith("--") or args[1].startswith("--"):
        raise SystemExit("usage: pytorch_compare.py BUILD_DIR OUT_DIR [--rounds N] [--seconds S] [--quick]")
    quick = "--quick" in args
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else (1 if quick else 5)
    seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else (0.05 if quick else 1.0)
    return os.path.abspath(args[0]), args[1], rounds, seconds, quick


def main():
    build, out_dir, rounds, seconds, quick = options(sys.argv[1:])
    bench_timeout = float(os.environ.get("DAGSIM_BENCH_TIMEOUT", 1200))
    rdzv_timeout = float(os.environ.get("DAGSIM_RDZV_TIMEOUT", 60 if quick else 300))
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    t0 = time.monotonic()
    sweep = growth.Sweep(build, quick)
    samples = {"ours": {}, "torch": {}, "torch_blas_free": {}}
    notes, failures, gave_up, group_seconds = {}, [], {}, {}

    def record(side, r, results_notes):
        results, ns = results_notes
        for key, row in results.items():
            samples[side].setdefault(key, []).append(dict(row, round=r))
        for key, note in ns.items():
            notes.setdefault(key, note)
            if note.startswith("failed"):
                failures.append(f"round {r + 1}: {key}: {note}")
                print(f"pytorch_compare: {key}: {note}", file=sys.stderr, flush=True)

    for r in range(rounds):
        for group, (binary, keys, torch_args) in groups(sweep).items():
            order = [("ours", lambda b=binary, k=keys: run_bench(os.path.join(build, b), k, seconds, bench_timeout)),
                     ("torch", lambda a=torch_args: run_torch(a, seconds))]
            if group == "local" and os.environ.get("OPENBLAS_CORETYPE"):
                # Context, not a ratio's denominator: PyTorch with OpenBLAS free to pick its kernels.
                order.append(("torch_blas_free", lambda a=torch_args: run_torch(a, seconds, blas_free=True)))
            if r % 2 == 1:
                order.reverse()
            for side, run in order:
                print(f"pytorch_compare: round {r + 1}/{rounds}, {group}, {side}", file=sys.stderr, flush=True)
                t = time.monotonic()
                record(side, r, run())
                group_seconds[f"{group}/{side}"] = group_seconds.get(f"{group}/{side}", 0) + time.monotonic() - t
        for group, run in (("sim", lambda: sweep.run_sim(seconds, bench_timeout)),
                           ("rendezvous", lambda: sweep.run_rendezvous(rdzv_timeout, gave_up))):
            print(f"pytorch_compare: round {r + 1}/{rounds}, {group}, dagsim only", file=sys.stderr, flush=True)
            t = time.monotonic()
            record("ours", r, run())
            group_seconds[group] = group_seconds.get(group, 0) + time.monotonic() - t
    for key in sweep.skipped:
        notes.setdefault(key, sweep.skipped[key])
    load_after = os.getloadavg()
    ours, torch = samples["ours"], samples["torch"]

    rows = []
    for label, key, aim in LOCAL + TCP:
        q = ratio_spread(ours, key, torch, key)
        free = [rec["time"] for rec in samples["torch_blas_free"].get(key, [])]
        d, t = ([rec["time"] for rec in side.get(key, [])] for side in (ours, torch))
        rows.append({"measure": label, "dagsim_key": key, "dagsim_s": spread(d) if d else None,
                     "pytorch_s": spread(t) if t else None, "pytorch_blas_free_s": spread(free) if free else None,
                     "ratio": q, "aim": aim[0] if aim else None, "note": None if q else not_measured(notes, key),
                     "verdict": None if aim is None else ("not measured" if q is None else
                                                          "meets" if aim[1](q["median"]) else "misses")})
    floors = []
    for label, key, raw, kind, aim in FLOOR:
        q = ratio_spread(ours, key, ours, raw, "time" if kind == "time" else "bytes_per_second")
        missing = key if key not in ours else raw
        floors.append({"measure": label, "ratio": q, "aim": aim[0] if aim else None,
                       "note": None if q else not_measured(notes, missing),
                       "verdict": None if aim is None else ("not measured" if q is None else
                                                            "meets" if aim[1](q["median"]) else "misses")})
    torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "load_before": load_before, "load_after": load_after,
               "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"), "dagsim_provenance": dagsim_provenance(build),
               "started": started, "rounds": rounds, "seconds_per_benchmark": seconds, "pytorch": torch_version,
               "kernel": platform.release(), "quick": quick, "wall_s": round(time.monotonic() - t0, 1),
               "wall_s_by_group": {k: round(v, 1) for k, v in group_seconds.items()}}
    doc = {"machine": machine, "pytorch": rows, "floor": floors, "aims": growth.aim_rows(ours, notes),
           "growth": growth.growth(sweep, samples, notes), "notes": notes, "failures": failures, "samples": samples}
    os.makedirs(out_dir, exist_ok=True)
    doc["plots_missing"] = growth.plots(doc, out_dir)
    with open(os.path.join(out_dir, "performance.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out_dir, "performance.md"), "w") as f:
        f.write(markdown(doc))
    print(f"pytorch_compare: wrote {out_dir}/performance.md in {machine['wall_s']} s "
          f"({', '.join(f'{k} {v} s' for k, v in machine['wall_s_by_group'].items())})", file=sys.stderr)
    if failures:
        raise SystemExit(f"pytorch_compare: {len(failures)} benchmark runs failed (the report says which)")


def markdown(doc):
    m = doc["machine"]
    out = ["# dagsim beside PyTorch, measured in one run", "",
           f"Generated by `scripts/bench_pytorch.sh` (`scripts/pytorch_compare.py`) on {m['started']}: "
           f"{m['rounds']} round{'s' if m['rounds'] != 1 else ''}, each running dagsim's benchmark and "
           f"PyTorch {m['pytorch']}'s counterpart "
           f"(`scripts/pytorch_counterparts.py`) back to back, the order alternating by round, "
           f"{m['seconds_per_benchmark']} s per benchmark. A ratio is dagsim's time over PyTorch's **in the "
           "same round**; each cell gives the median over the rounds and, in brackets, the min to max. "
           "Times are means per iteration, wall clock, one thread on both sides (our serial OpenBLAS; "
           "`torch.set_num_threads(1)`), both with glibc's mmap threshold at 64 MiB. PyTorch's RPC is "
           "TensorPipe on loopback; dagsim's is its TCP transport with MACs on (PyTorch authenticates "
           "nothing). No figure here comes from another run.", ""]
    if m.get("quick"):
        out += ["**A `--quick` run**: one round of short benchmarks and fewer sweep sizes, a smoke test of the "
                "pipeline; its figures are not to be quoted.", ""]
    out += ["## Against PyTorch", "",
           "| Measure | dagsim | PyTorch | ratio (dagsim / PyTorch) | aim | verdict |", "|---|---|---|---|---|---|"]
    for r in doc["pytorch"]:
        if r["ratio"] is None:
            d, t = (fmt_spread(x, fmt_t) if x else r["note"] for x in (r["dagsim_s"], r["pytorch_s"]))
            out.append(f"| {r['measure']} | {d} | {t} | {r['note']} | {r['aim'] or ''} | {r['verdict'] or ''} |")
            continue
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
            q = ratio_spread(doc["samples"]["ours"], key, doc["samples"]["torch_blas_free"], key)
            out.append(f"| {r['measure']} | {fmt_spread(r['pytorch_blas_free_s'], fmt_t)} | "
                       + (f"{q['median']:.2f}x ({q['min']:.2f} to {q['max']:.2f}) |" if q else "not measured |"))
    out += ["", "## Against the raw-socket floor (same run)", "",
            "| Measure | ratio | aim | verdict |", "|---|---|---|---|"]
    for r in doc["floor"]:
        q = r["ratio"]
        shown = f"{q['median']:.2f} ({q['min']:.2f} to {q['max']:.2f})" if q else r["note"]
        out.append(f"| {r['measure']} | {shown} | {r['aim'] or ''} | {r['verdict'] or ''} |")
    out += [""] + growth.markdown(doc)
    out += ["", "Rendezvous formation and re-formation over TCP, beside PyTorch's c10d rendezvous run for run, "
            "are in [rendezvous_tcp.md](rendezvous_tcp.md), which `scripts/bench_pytorch.sh` regenerates after "
            "this report (with [transports.md](transports.md)).", "",
            "## Machine", "",
            f"{m['cpu']}, {m['cores']} cores, Linux {m['kernel']}; load average (1, 5, 15 min) "
            f"{', '.join(f'{x:.2f}' for x in m['load_before'])} before and "
            f"{', '.join(f'{x:.2f}' for x in m['load_after'])} after; {m['wall_s']:,.0f} s in all. Every sample "
            "is in `performance.json`.", ""]
    if doc["failures"]:
        out += ["## Failed runs", ""] + [f"- {f}" for f in doc["failures"]] + [""]
    return "\n".join(out)


if __name__ == "__main__":
    main()
