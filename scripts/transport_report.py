#!/usr/bin/python3
"""Writes reports/transports.md: dagsim's TCP transport against the machine's raw-socket floor.

Usage: transport_report.py BENCH_JSON OUT_DIR  (BENCH_JSON from dagsim_bench_tcp
--benchmark_format=json --benchmark_out=FILE; scripts/bench_transports.sh runs both).
Promises: reads only that file; writes OUT_DIR/transports.md and three SVG plots it links
relatively; takes each benchmark's median aggregate (else the median of its iteration entries),
converts every time by its time_unit, and says "not measured" for any benchmark that is missing
instead of failing. Headline figures are ratios within the one run. Exit 2 without matplotlib.
"""
import json
import os
import re
import statistics
import sys

SIZES = (64, 4096, 1048576)
UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
RPC_AIM = 1.5                  # RPC round trip within 1.5x of raw ping-pong (issue 25)
STREAM_AIM = 0.8               # 1 MiB tensors at >= 80% of raw loopback bandwidth (issue 25)
# PyTorch's figures are measured beside ours in one run by scripts/bench_pytorch.sh
# (reports/performance.md); this report quotes none.
# Options Google Benchmark appends to a run name (/real_time, /repeats:3, ...) are not in the key.
OPTION = re.compile(r"^(real_time|process_time|manual_time|(iterations|repeats|threads|"
                    r"min_time|min_warmup_time):.*)$")
NM = "not measured"
# The benchmarks' last arg (bench/transport_bench.h, BenchChannel): 0 the shared secret with a MAC
# per envelope (the channel before issue 49), 1 --trusted-network, 2 mutual TLS 1.3 (the default).
TRUST = ((0, "MACs on"), (1, "trusted"), (2, "TLS"))


def key_of(entry):
    name = entry.get("run_name") or re.sub(r"_(mean|median|stddev|cv)$", "", entry["name"])
    # Named arguments (ArgNames: "bytes:64") keep only their value.
    return "/".join(p.rpartition(":")[2] for p in name.split("/") if not OPTION.match(p))


def load(path):
    """Returns (context, {key: {"time": seconds of real time, counter: value, ...}})."""
    with open(path) as f:
        doc = json.load(f)
    medians, iterations = {}, {}
    for e in doc.get("benchmarks", []):
        if e.get("error_occurred") or "real_time" not in e:
            continue
        row = {k: v for k, v in e.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        row["time"] = e["real_time"] * UNIT_S[e.get("time_unit", "ns")]
        if e.get("run_type") == "aggregate":
            if e.get("aggregate_name") == "median":
                medians[key_of(e)] = row
        else:
            iterations.setdefault(key_of(e), []).append(row)
    results = {}
    for k, rows in iterations.items():  # no median aggregate: the median of the repetitions
        results[k] = {f: statistics.median(r[f] for r in rows if f in r) for f in rows[0]}
    results.update(medians)
    spread = {k: (min(r["time"] for r in rows), statistics.median(r["time"] for r in rows), max(r["time"] for r in rows),
                  [r.get("bytes_per_second") for r in rows])
              for k, rows in iterations.items()}
    results["__spread__"] = spread
    return doc.get("context", {}), results


def t(r, name):
    return r[name]["time"] if name is not None and name in r else None


def bw(r, name):
    return r.get(name, {}).get("bytes_per_second")


def fmt_t(s):
    if s is None:
        return NM
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3)):
        if abs(s) < 1000 * scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"


def fmt_bw(b):
    return NM if b is None else f"{b / 1e6:,.0f} MB/s"


def size_name(n):
    return f"{n // 1048576} MiB" if n >= 1048576 else f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


def div(a, b):
    return None if a is None or b is None or b == 0 else a / b


def verdict(q, ok):
    return NM if q is None else "meets" if ok(q) else "misses"


def headline(r):
    rows, stream, seed = [], [], []  # seed: PyTorch's ratio is in reports/performance.md
    for n in SIZES:
        for trusted, label in TRUST:
            ours, raw = t(r, f"BM_TcpRpc/{n}/{trusted}"), t(r, f"BM_RawPingPong/{n}")
            q = div(ours, raw)
            rows.append((f"RPC round trip, {size_name(n)}, {label}",
                         NM if q is None else f"{q:.2f}x ({fmt_t(ours)} vs raw {fmt_t(raw)})",
                         f"<= {RPC_AIM}x raw ping-pong", verdict(q, lambda v: v <= RPC_AIM)))
    for trusted, label in TRUST:
        ours, raw = bw(r, f"BM_TcpStream/1048576/{trusted}"), bw(r, "BM_RawStream/1048576")
        q = div(ours, raw)
        stream.append((f"1 MiB tensor stream, {label}",
                       NM if q is None else f"{q:.0%} ({fmt_bw(ours)} vs raw {fmt_bw(raw)})",
                       f">= {STREAM_AIM:.0%} of raw loopback", verdict(q, lambda v: v >= STREAM_AIM)))
    return rows + stream + seed


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def mac_row(label, on, off, fmt):
    cost = None if on is None or off is None else on - off
    rel = div(cost, off)
    return label, fmt(on), fmt(off), fmt(cost), NM if rel is None else f"{rel:+.0%}"


def channel_section(r):
    """The new channel (TLS) beside the old one (the shared secret's MACs), min / median / max of the
    repetitions of one run, whose benchmarks ran interleaved."""
    spread = r.get("__spread__", {})

    def cell(key, bandwidth):
        if key not in spread:
            return NM
        lo, med, hi, rates = spread[key]
        if bandwidth:
            rates = sorted(x for x in rates if x is not None)
            if not rates:
                return NM
            return f"{fmt_bw(rates[0])} / {fmt_bw(statistics.median(rates))} / {fmt_bw(rates[-1])}"
        return f"{fmt_t(lo)} / {fmt_t(med)} / {fmt_t(hi)}"

    rows = []
    for label, stem, bandwidth in (("1 MiB RPC round trip", "BM_TcpRpc/1048576", False),
                                   ("64 B RPC round trip", "BM_TcpRpc/64", False),
                                   ("1 MiB tensor stream", "BM_TcpStream/1048576", True)):
        rows.append((label, cell(stem + "/0", bandwidth), cell(stem + "/2", bandwidth), cell(stem + "/1", bandwidth)))
    return ["", "## The channel: TLS beside the shared secret's MACs", "",
            "Mutual TLS 1.3 with a certificate per node (the default since issue 49) against the channel "
            "before it (the shared secret's handshake and a Poly1305 MAC per envelope, nothing "
            "encrypted) and `--trusted-network` (plain after the handshake), measured in the same run; "
            "min / median / max of the repetitions (for the stream, of their bandwidth).", ""] + \
        table(("Measure", "shared secret, MACs (old)", "TLS (new)", "trusted"), rows)


def markdown(ctx, r, src):
    macs = []
    rpcs = [(f"RPC round trip, {size_name(n)}", f"BM_TcpRpc/{n}", t, fmt_t) for n in SIZES]
    for label, stem, get, fmt in rpcs + [
            ("Seed step", "BM_TcpSeedStep", t, fmt_t), ("MLP step, float64", "BM_TcpMlpStep{}/0", t, fmt_t),
            ("MLP step, float32", "BM_TcpMlpStep{}/1", t, fmt_t),
            ("1 MiB stream (bandwidth)", "BM_TcpStream/1048576", bw, fmt_bw)]:
        on, off = (stem.format("/0"), stem.format("/1")) if "{}" in stem else (stem + "/0", stem + "/1")
        macs.append(mac_row(label, get(r, on), get(r, off), fmt))
    lat = [(size_name(n), fmt_t(t(r, f"BM_RawPingPong/{n}")), fmt_t(t(r, f"BM_TcpRpc/{n}/0")),
            fmt_t(t(r, f"BM_TcpRpc/{n}/1")), fmt_t(t(r, f"BM_TcpRpc/{n}/2")), fmt_t(t(r, f"BM_SimRpc/{n}")))
           for n in SIZES]
    steps = [(label, fmt_t(t(r, on)), fmt_t(t(r, off)), fmt_t(t(r, alone)) + where)
             for label, on, off, alone, where in (
                 ("Seed example step", "BM_TcpSeedStep/0", "BM_TcpSeedStep/1", "BM_SimSeedStep", " (simulator)"),
                 ("8-layer MLP step, float64", "BM_TcpMlpStep/0/0", "BM_TcpMlpStep/1/0", "BM_MlpLocal",
                  " (local engine)"),
                 ("8-layer MLP step, float32", "BM_TcpMlpStep/0/1", "BM_TcpMlpStep/1/1", None, ""))]
    thr = [("1 MiB writes / tensors", fmt_bw(bw(r, "BM_RawStream/1048576")),
            fmt_bw(bw(r, "BM_TcpStream/1048576/0")), fmt_bw(bw(r, "BM_TcpStream/1048576/1")),
            fmt_bw(bw(r, "BM_TcpStream/1048576/2")))]
    out = ["# dagsim transports: TCP against the raw-socket floor", "",
           f"Generated by `scripts/transport_report.py` from `{os.path.basename(src)}`; regenerate with "
           "`scripts/bench_transports.sh` (it runs `dagsim_bench_tcp` and this script). Every figure "
           "is the median of the run's repetitions, wall-clock (real) time.", "",
           "## Headline: ratios to the floor measured in the same run", "",
           "The floor is two processes doing the same exchange over blocking loopback sockets "
           "(`BM_RawPingPong`, `BM_RawStream`). Absolute times drift on shared machines; these "
           "ratios, taken within one run, are the headline. \"Trusted\" is `--trusted-network` "
           "(no MACs).", ""]
    out += table(("Measure", "Measured", "Aim", "Verdict"), headline(r))
    out += ["", "PyTorch's counterparts of these benchmarks are measured beside ours, in one run, by "
            "`scripts/bench_pytorch.sh`: see [performance.md](performance.md). No PyTorch figure is "
            "quoted here.", ""]
    out += ["", "## Absolute figures", "", "Round-trip latency by message size (request and reply "
            "each carry N bytes; the simulator column is the wall cost of simulating one round trip):", ""]
    out += table(("Size", "raw ping-pong", "TCP RPC, MACs on", "TCP RPC, trusted", "TCP RPC, TLS", "simulated RPC"), lat)
    out += ["", "Steps (2 processes over TCP; the last column runs in one process):", ""]
    out += table(("Step", "TCP, MACs on", "TCP, trusted", "in-process"), steps)
    out += ["", "Throughput (the `bytes_per_second` counter; MB = 10^6 bytes):", ""]
    out += table(("Stream", "raw loopback", "TCP, MACs on", "TCP, trusted", "TCP, TLS"), thr)
    out += channel_section(r)
    out += ["", "## What the MACs cost", "", "MACs on against `--trusted-network`; the relative cost is "
            "(MACs on - trusted) / trusted, so for bandwidth a negative figure is the loss.", ""]
    out += table(("Benchmark", "MACs on", "trusted", "cost", "relative"), macs)
    out += ["", "## Plots", "", "![Round-trip latency by message size](transports_latency.svg)", "",
            "![Streaming throughput](transports_throughput.svg)", "",
            "![Where the round-trip time goes](transports_breakdown.svg)", "",
            "The last plot splits each round trip with MACs into the floor (raw ping-pong), dagsim's "
            "overhead (trusted - raw) and the MACs (MACs on - trusted); a difference that noise "
            "makes negative is drawn as zero.", "",
            "## Machine", ""]
    out += table(("host", "date", "CPUs", "MHz per CPU", "benchmark library build"),
                 [(ctx.get("host_name", "?"), ctx.get("date", "?"), ctx.get("num_cpus", "?"),
                   ctx.get("mhz_per_cpu", "?"), ctx.get("library_build_type", "?"))])
    return "\n".join(out) + "\n"


def plot_latency(plt, r, out_dir):
    x = SIZES
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, fmt in (("raw ping-pong", "BM_RawPingPong/{}"), ("TCP RPC, MACs on", "BM_TcpRpc/{}/0"),
                       ("TCP RPC, trusted", "BM_TcpRpc/{}/1"), ("simulated RPC", "BM_SimRpc/{}")):
        pts = [(n, t(r, fmt.format(n))) for n in x if t(r, fmt.format(n)) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] * 1e6 for p in pts], marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="message size (request and reply)",
           ylabel="round trip (us)", title="Round-trip latency by message size")
    ax.set_xticks(x, [size_name(n) for n in x])
    if ax.lines:
        ax.legend()
    else:
        ax.text(0.5, 0.5, NM, ha="center", transform=ax.transAxes)
    ax.grid(True, which="both", alpha=0.3)
    save(fig, plt, out_dir, "transports_latency.svg")


def plot_throughput(plt, r, out_dir):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    names = ("raw loopback", "TCP, MACs on", "TCP, trusted")
    vals = [bw(r, k) for k in ("BM_RawStream/1048576", "BM_TcpStream/1048576/0", "BM_TcpStream/1048576/1")]
    bars = ax.bar(names, [(v or 0) / 1e6 for v in vals], color=("grey", "tab:orange", "tab:green"))
    ax.bar_label(bars, labels=[NM if v is None else f"{v / 1e6:,.0f}" for v in vals])
    ax.set(ylabel="MB/s", title="Streaming 1 MiB writes / tensors", ylim=(0, None))
    save(fig, plt, out_dir, "transports_throughput.svg")


def plot_breakdown(plt, r, out_dir):
    """Per size, the round trip with MACs as floor + dagsim overhead (trusted - raw) + MACs (on - trusted)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels, parts = [], {"floor (raw ping-pong)": [], "dagsim overhead": [], "MAC cost": []}
    for n in SIZES:
        raw, on, off = t(r, f"BM_RawPingPong/{n}"), t(r, f"BM_TcpRpc/{n}/0"), t(r, f"BM_TcpRpc/{n}/1")
        if None in (raw, on, off):
            continue
        labels.append(f"{size_name(n)}\n({fmt_t(on)})")
        pieces = (raw, max(off - raw, 0), max(on - off, 0))  # noise can make a difference negative
        for k, v in zip(parts, pieces):
            parts[k].append((v / sum(pieces), v))
    bottom = [0.0] * len(labels)
    for (k, shares), color in zip(parts.items(), ("grey", "tab:blue", "tab:red")):
        bars = ax.bar(labels, [s * 100 for s, _ in shares], bottom=[b * 100 for b in bottom], label=k,
                      color=color)
        ax.bar_label(bars, labels=[fmt_t(v) if s > 0.04 else "" for s, v in shares], label_type="center")
        bottom = [b + s for b, (s, _) in zip(bottom, shares)]
    ax.set(ylabel="% of the round trip with MACs", title="Where the RPC round-trip time goes",
           ylim=(0, 100))
    if labels:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    else:
        ax.text(0.5, 0.5, NM, ha="center", transform=ax.transAxes)
    save(fig, plt, out_dir, "transports_breakdown.svg")


def save(fig, plt, out_dir, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), metadata={"Date": None})
    plt.close(fig)


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: transport_report.py BENCH_JSON OUT_DIR")
    try:
        import matplotlib
    except ImportError:
        print("transport_report.py: needs matplotlib: install the Debian package python3-matplotlib "
              "(scripts/deps.sh report)", file=sys.stderr)
        return 2
    matplotlib.use("svg")
    matplotlib.rcParams["svg.hashsalt"] = "dagsim"  # stable ids: a rerun on the same data diffs clean
    import matplotlib.pyplot as plt
    try:
        ctx, results = load(argv[1])
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"transport_report.py: cannot read {argv[1]} as Google Benchmark JSON: {e!r}")
    os.makedirs(argv[2], exist_ok=True)
    with open(os.path.join(argv[2], "transports.md"), "w") as f:
        f.write(markdown(ctx, results, argv[1]))
    for plot in (plot_latency, plot_throughput, plot_breakdown):
        plot(plt, results, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
