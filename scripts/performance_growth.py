#!/usr/bin/python3
"""How dagsim's cost grows, and the aims with no PyTorch counterpart: the half of
reports/performance.md that scripts/pytorch_compare.py (which imports this module and runs the
rounds) does not define itself.

Promises:
- Four sweeps (issue 53 item 5), each a table and an SVG plot (OUT_DIR/performance_*.svg) of the
  median over the rounds with min-to-max bars, log-log: simulator messages per second against nodes
  (BM_SimGrowth/nodes:N); rendezvous formation wall and virtual time against nodes
  (BM_RendezvousFormation/nodes:N/poll_ms:0/spread:0, with each run's peak memory); RPC round trip
  against payload (BM_TcpRpc/<bytes>/0 beside BM_RawPingPong/<bytes> and PyTorch's TensorPipe);
  the MLP step against width (BM_MlpWidth/width:N beside PyTorch's counterpart, same key).
- The dagsim-only aims (simulator messages per second, heartbeat virtual over wall time,
  rendezvous wall time at 1,000 and 10,000 nodes, virtual formation time after the last join) get
  the median over the rounds, min to max, and a verdict on the median.
- A benchmark this build lacks, or a run that timed out or failed, is a cell that says so
  ("not measured (...)"), never a crash and never a number from another run.
- Every benchmark process runs under a timeout; each rendezvous formation runs in its own process,
  so one slow node count loses only itself, and its peak RSS (os.wait4) is that formation's memory.
- Plots use matplotlib's svg backend with a fixed hashsalt and no date: a rerun on the same data
  diffs clean. Without matplotlib the tables are still written and the plots are said to be missing.
"""
import json
import os
import re
import statistics
import subprocess
import tempfile
import time

UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
# Google Benchmark's fields that are not counters; every other number in a record is kept.
NOT_COUNTERS = {"family_index", "per_family_instance_index", "repetitions", "repetition_index", "threads",
                "real_time", "cpu_time"}

RPC_SIZES = {False: (64, 4096, 65536, 1048576, 16777216, 67108864), True: (64, 65536, 1048576)}
MLP_WIDTHS = {False: (64, 128, 256, 512, 1024, 2048), True: (64, 256, 1024)}
# Sim and rendezvous node counts are whatever the binaries register in these ranges (they are
# listed first); --quick keeps the preferred counts among them, or the smallest and largest.
SIM_RANGE, SIM_QUICK = (4, 4096), (4, 64, 1024)
RDZV_RANGE, RDZV_QUICK = (16, 10000), (16, 256, 1000)
RDZV_LISTED = r"^BM_RendezvousFormation/nodes:[0-9]+/poll_ms:0/spread:0"
# The aims' formations are run even when the listing lacks them, so a missing one reads as such.
RDZV_AIM_NODES = (1000, 10000)
# Formations this large run in the first round only, with this many times the rendezvous timeout.
RDZV_ONCE_NODES, RDZV_ONCE_TIMEOUT_FACTOR = 4096, 3


def rdzv_key(nodes, spread=0):
    return f"BM_RendezvousFormation/nodes:{nodes}/poll_ms:0/spread:{spread}"


def sim_key(nodes):
    return f"BM_SimGrowth/nodes:{nodes}"


# (label, dagsim key, field, formatter, aim text, predicate on the median)
AIMS = [
    ("Simulator messages per second, all-to-all of 64 nodes", "BM_SimAllToAll/64", "msgs_per_s",
     lambda v: f"{v / 1e6:.2f} M/s", ">= 10 M/s", lambda v: v >= 10e6),
    ("Heartbeat example (4 nodes): virtual over wall time", "BM_HeartbeatVirtualMinutes", "virtual_s_per_wall_s",
     lambda v: f"{v:,.0f}x", ">= 200,000x", lambda v: v >= 200_000),
    ("Rendezvous of 1,000 simulated nodes (all join at once): wall time", rdzv_key(1000), "time",
     lambda v: fmt_t(v), "< 1 s", lambda v: v < 1),
    ("Rendezvous of 10,000 simulated nodes (all join at once): wall time", rdzv_key(10000), "time",
     lambda v: fmt_t(v), "< 15 s", lambda v: v < 15),
    ("Rendezvous of 1,000 nodes, joins spread over 1 s: virtual time from the last join to formed",
     rdzv_key(1000, 1), "virtual_ms", lambda v: f"{v:,.2f} ms",
     "<= 4 ms (2 store round trips over 0.5-1 ms links)", lambda v: v <= 4),
]


# ---- small shared helpers (pytorch_compare.py uses them too) --------------------------------------

def spread(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def fmt_t(s):
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3)):
        if abs(s) < 1000 * scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"


def fmt_spread(d, f):
    return f"{f(d['median'])} ({f(d['min'])} to {f(d['max'])})"


def field(rec, name):
    """A record's figure; msgs_per_s also answers to messages_per_s or items_per_second."""
    names = {"msgs_per_s": ("msgs_per_s", "messages_per_s", "items_per_second")}.get(name, (name,))
    return next((rec[n] for n in names if rec.get(n) is not None), None)


def not_measured(notes, key):
    return f"not measured ({notes.get(key, 'benchmark missing')})"


# ---- running benchmarks ---------------------------------------------------------------------------

def regex_of(keys):
    alts = "|".join(re.escape(k) for k in sorted(set(keys)))
    return f"^({alts})(/iterations:[0-9]+)?(/manual_time|/real_time)?$"


def key_of(name):
    return re.sub(r"(/iterations:\d+)?(/manual_time|/real_time)?$", "", name)


def listed(binary, pattern, env=None):
    """The benchmark keys `binary` registers that match the regex `pattern` (nothing runs)."""
    if not os.path.exists(binary):
        return []
    out = subprocess.run([binary, "--benchmark_list_tests", f"--benchmark_filter={pattern}"],
                         capture_output=True, text=True, timeout=60, env=env).stdout
    return [key_of(line.strip()) for line in out.splitlines() if line.strip()]


def run_bench(binary, keys, seconds, timeout, env=None):
    """Runs exactly `keys` of `binary` in one process. Returns ({key: record}, {key: note}): a record
    has "time" (seconds per iteration, wall), every counter, and "peak_rss_bytes" of the process."""
    keys = sorted(set(keys))
    if not os.path.exists(binary):
        return {}, {k: f"no {os.path.basename(binary)} built" for k in keys}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([binary, f"--benchmark_filter={regex_of(keys)}", f"--benchmark_min_time={seconds}",
                              "--benchmark_format=json"], stdout=out, stderr=err, env=env)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                p.returncode = -9
                return {}, {k: f"timed out after {timeout:.0f} s" for k in keys}
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, err_text = out.read().decode(), err.read().decode(errors="replace")
    if "Failed to match any benchmarks" in err_text:  # none of the keys is registered
        return {}, {k: "benchmark missing" for k in keys}
    try:
        benchmarks = json.loads(text)["benchmarks"]
    except (ValueError, KeyError):
        why = f"failed: exit {p.returncode}: {err_text.strip().splitlines()[-1:] or ''}"
        return {}, {k: why for k in keys}
    results, notes = {}, {}
    for b in benchmarks:
        if b.get("run_type") == "aggregate":
            continue
        key = key_of(b["name"])
        if b.get("error_occurred"):
            notes[key] = f"failed: {b.get('error_message')}"
            continue
        rec = {k: v for k, v in b.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
               and k not in NOT_COUNTERS}
        rec["time"] = b["real_time"] * UNIT_S[b["time_unit"]]
        rec["peak_rss_bytes"] = usage.ru_maxrss * 1024
        results[key] = rec
    for k in keys:
        if k not in results and k not in notes:
            notes[k] = "benchmark missing" if p.returncode == 0 else f"failed: exit {p.returncode}"
    return results, notes


class Sweep:
    """What one run measures: the sizes of each sweep and the dagsim-only keys."""

    def __init__(self, build, quick):
        self.quick = quick
        self.rpc_sizes = RPC_SIZES[quick]
        self.mlp_widths = MLP_WIDTHS[quick]
        self.sim_bin = os.path.join(build, "bench", "dagsim_bench")
        self.rdzv_bin = os.path.join(build, "bench", "dagsim_bench_rendezvous")
        self.sim_nodes = self._pick(listed(self.sim_bin, r"^BM_SimGrowth/nodes:[0-9]+"), SIM_RANGE, SIM_QUICK)
        # 4096 and 10,000 nodes are registered only in the benchmark tier (bench/bm_rendezvous.cc).
        self.rdzv_env = dict(os.environ, DAGSIM_RENDEZVOUS_LARGE="0" if quick else "1")
        self.rdzv_nodes = self._pick(listed(self.rdzv_bin, RDZV_LISTED, self.rdzv_env),
                                     RDZV_RANGE, RDZV_QUICK)
        aims = (1000,) if quick else RDZV_AIM_NODES  # --quick: 10,000 nodes is not a smoke test
        self.rdzv_keys = sorted({rdzv_key(n) for n in self.rdzv_nodes + aims} | {rdzv_key(1000, 1)})
        self.skipped = {rdzv_key(n): "skipped by --quick" for n in RDZV_AIM_NODES if n not in aims}
        self.rdzv_ran_once = set()

    def _pick(self, keys, bounds, quick_pick):
        nodes = sorted({int(re.search(r"nodes:(\d+)", k).group(1)) for k in keys})
        nodes = [n for n in nodes if bounds[0] <= n <= bounds[1]]
        if self.quick:
            nodes = [n for n in nodes if n in quick_pick] or sorted({nodes[0], nodes[-1]} if nodes else ())
        return tuple(nodes)

    def rpc_keys(self):
        return [f"BM_TcpRpc/{b}/0" for b in self.rpc_sizes] + [f"BM_RawPingPong/{b}" for b in self.rpc_sizes]

    def mlp_keys(self):
        return [f"BM_MlpWidth/width:{w}" for w in self.mlp_widths]

    def sim_keys(self):
        return ["BM_SimAllToAll/64", "BM_HeartbeatVirtualMinutes"] + [sim_key(n) for n in self.sim_nodes]

    def run_sim(self, seconds, timeout):
        return run_bench(self.sim_bin, self.sim_keys(), seconds, timeout)

    def run_rendezvous(self, timeout, gave_up):
        """One process per formation; a formation that timed out in an earlier round (`gave_up`) is
        not tried again, and one of RDZV_ONCE_NODES or more runs in the first round only (with
        timeout * RDZV_ONCE_TIMEOUT_FACTOR): at 10,000 nodes one formation takes minutes, and its
        figures are virtual (exact for the seed) or its wall time, which a single run shows."""
        results, notes = {}, {}
        for key in self.rdzv_keys:
            if key in gave_up:
                notes[key] = gave_up[key]
                continue
            once = int(re.search(r"nodes:(\d+)", key).group(1)) >= RDZV_ONCE_NODES
            if once and key in self.rdzv_ran_once:
                continue
            r, n = run_bench(self.rdzv_bin, [key], 0, timeout * (RDZV_ONCE_TIMEOUT_FACTOR if once else 1),
                             self.rdzv_env)
            results.update(r)
            notes.update(n)
            if once:
                self.rdzv_ran_once.add(key)
            if "timed out" in n.get(key, ""):
                gave_up[key] = n[key]
        return results, notes


# ---- rows, growth series, markdown, plots ------------------------------------------------------------

def values(samples, key, name):
    return [v for v in (field(rec, name) for rec in samples.get(key, [])) if v is not None]


def aim_rows(samples, notes):
    rows = []
    for label, key, name, fmt, aim, ok in AIMS:
        vs = values(samples, key, name)
        q = spread(vs) if vs else None
        if q:
            verdict = "meets" if ok(q["median"]) else "misses"
        elif name == "time" and notes.get(key, "").startswith("timed out"):
            verdict = "misses"  # a wall-time bound, and the run outlasted its (larger) timeout
        else:
            verdict = "not measured"
        shown = fmt_spread(q, fmt) if q else not_measured(notes, key)
        checked = [rec["invariants"] for rec in samples.get(key, []) if "invariants" in rec]
        if checked:  # the rendezvous formations check their invariants (bench/rendezvous_formation.h)
            shown += "; invariants checked" if all(checked) else "; invariants NOT checked in every round"
        rows.append({"measure": label, "dagsim_key": key, "field": name, "value": q, "shown": shown, "aim": aim,
                     "verdict": verdict})
    return rows


def ratio_spread(samples_a, key_a, samples_b, key_b, name="time"):
    """Per-round a / b, paired by round; None where no round has both."""
    b_by_round = {rec["round"]: field(rec, name) for rec in samples_b.get(key_b, [])}
    rs = [field(rec, name) / b_by_round[rec["round"]] for rec in samples_a.get(key_a, [])
          if b_by_round.get(rec["round"])]
    return spread(rs) if rs else None


def growth(sweep, samples, notes):
    """The four series as plain data (into performance.json): per x, each line's spread or None."""
    ours, torch = samples["ours"], samples["torch"]

    def pts(side, fmt, xs, name="time", scale=1.0):
        out = []
        for x in xs:
            vs = values(side, fmt.format(x), name)
            missing = ("not measured (no counterpart in scripts/pytorch_counterparts.py)" if side is torch
                       else not_measured(notes, fmt.format(x)))
            out.append({"x": x, "y": {k: v * scale for k, v in spread(vs).items()} if vs else None,
                        "note": None if vs else missing})
        return out

    rdzv_nodes = sorted({int(re.search(r"nodes:(\d+)", k).group(1)) for k in sweep.rdzv_keys
                         if k.endswith("spread:0")})
    return {
        "sim": {"x": "nodes", "lines": {"dagsim": pts(ours, "BM_SimGrowth/nodes:{}", sweep.sim_nodes, "msgs_per_s")}},
        "rendezvous": {"x": "nodes", "lines": {
            "wall (build + run)": pts(ours, rdzv_key("{}"), rdzv_nodes),
            "virtual, last join to formed": pts(ours, rdzv_key("{}"), rdzv_nodes, "virtual_ms", 1e-3),
            "peak memory": pts(ours, rdzv_key("{}"), rdzv_nodes, "peak_rss_bytes")}},
        "rpc": {"x": "bytes", "lines": {
            "dagsim TCP RPC, MACs on": pts(ours, "BM_TcpRpc/{}/0", sweep.rpc_sizes),
            "raw ping-pong": pts(ours, "BM_RawPingPong/{}", sweep.rpc_sizes),
            "PyTorch TensorPipe": pts(torch, "BM_TcpRpc/{}/0", sweep.rpc_sizes)},
            "ratio_torch": [ratio_spread(ours, f"BM_TcpRpc/{b}/0", torch, f"BM_TcpRpc/{b}/0")
                            for b in sweep.rpc_sizes],
            "ratio_raw": [ratio_spread(ours, f"BM_TcpRpc/{b}/0", ours, f"BM_RawPingPong/{b}")
                          for b in sweep.rpc_sizes]},
        "mlp": {"x": "width", "lines": {
            "dagsim": pts(ours, "BM_MlpWidth/width:{}", sweep.mlp_widths),
            "PyTorch": pts(torch, "BM_MlpWidth/width:{}", sweep.mlp_widths)},
            "ratio_torch": [ratio_spread(ours, f"BM_MlpWidth/width:{w}", torch, f"BM_MlpWidth/width:{w}")
                            for w in sweep.mlp_widths]},
    }


def size_name(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


PLOTS = {  # sweep: (file, title, x label, y label, x formatter, aim markers [(x, y, label)])
    "sim": ("performance_sim_growth.svg", "Simulator throughput against nodes", "simulated nodes",
            "messages per wall second", str, [(64, 10e6, "aim: 10 M/s (all-to-all of 64)")]),
    "rendezvous": ("performance_rendezvous_growth.svg", "Rendezvous formation against nodes (all join at once)",
                   "simulated nodes", "seconds", lambda n: f"{n:,}", [(1000, 1.0, "aim: wall < 1 s"),
                                                                       (10000, 15.0, "aim: wall < 15 s")]),
    "rpc": ("performance_rpc_growth.svg", "RPC round trip against payload (loopback)", "payload (request and reply)",
            "round trip (s)", size_name, []),
    "mlp": ("performance_mlp_growth.svg", "Local MLP training step against width", "width",
            "step (s)", str, []),
}
SECTIONS = {
    "sim": "Messages delivered per wall second of `world.run()` against the simulated cluster's size "
           "(`BM_SimGrowth/nodes:N`, dagsim_bench: the same work per node, so a flat line means the "
           "simulator scales; bench/bm_sim.cc says the traffic). No PyTorch counterpart: PyTorch has no "
           "simulator.",
    "rendezvous": "Formation of N simulated nodes joining at once, event-driven "
                  "(`BM_RendezvousFormation/nodes:N/poll_ms:0/spread:0`, dagsim_bench_rendezvous, one process "
                  "per N): wall time to build and run the formation, virtual time from the last join to the "
                  "last return from `next_rendezvous`, and the process's peak RSS. Up to 2,048 nodes the nodes "
                  "keep PyTorch's 5 s keep-alive; from 4,096 it is N * 15 ms (61 s, 150 s), as an operator "
                  "would set it (one compare-and-set key cannot commit N / 5 heartbeats a second; "
                  "bench/bm_rendezvous.cc, keep_alive_for), and those formations run in the first round "
                  "only (minutes each). PyTorch's c10d rendezvous "
                  "over real TCP is in [rendezvous_tcp.md](rendezvous_tcp.md).",
    "rpc": "One RPC echoing a tensor of the payload size over loopback TCP: dagsim with MACs on "
           "(`BM_TcpRpc/<bytes>/0`), the raw-socket ping-pong floor (`BM_RawPingPong/<bytes>`) and "
           "PyTorch's TensorPipe (`rpc_sync` of an echo), in the same rounds.",
    "mlp": "One local training step (forward, loss, gradients of the weights) of an MLP whose layers "
           "have the given width (`BM_MlpWidth/width:N`, bench/bm_mlp.cc, which says the depth, batch and "
           "dtype), beside PyTorch's same step (scripts/pytorch_counterparts.py).",
}


def cell(p, fmt):
    return p["note"] if p["y"] is None else fmt_spread(p["y"], fmt)


def ratio_cell(q):
    return "" if q is None else f"{q['median']:.2f}x ({q['min']:.2f} to {q['max']:.2f})"


def markdown(doc):
    out = ["## Against the aims (dagsim only)", "",
           "No PyTorch counterpart: these are the simulator's and the simulated rendezvous's own aims "
           "(issue 53), the median over the rounds and, in brackets, the min to max.", "",
           "| Measure | dagsim | aim | verdict |", "|---|---|---|---|"]
    out += [f"| {r['measure']} | {r['shown']} | {r['aim']} | {r['verdict']} |" for r in doc["aims"]]
    out += ["", "## How cost grows", "",
            "Each point is the median over the rounds, the bars the min to max; both axes are logarithmic."]
    g = doc["growth"]
    fmts = {"sim": lambda v: f"{v / 1e6:.2f} M/s", "rendezvous": fmt_t, "rpc": fmt_t, "mlp": fmt_t}
    for name, (svg, title, xlabel, _, xfmt, _) in PLOTS.items():
        s = g[name]
        lines = s["lines"]
        out += ["", f"### {title}", "", SECTIONS[name], "", f"![{title}]({svg})", ""]
        ratios = [(h, k) for h, k in (("dagsim / PyTorch", "ratio_torch"), ("dagsim / raw", "ratio_raw")) if k in s]
        heads = [xlabel] + list(lines) + [h for h, _ in ratios]
        out += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        xs = [p["x"] for p in next(iter(lines.values()))]
        if not xs:
            blank = [""] * (len(heads) - 1)
            out.append("| " + " | ".join(["not measured (no such benchmark in this build)"] + blank) + " |")
        for i, x in enumerate(xs):
            row = [xfmt(x)] + [cell(pl[i], (lambda v: f"{v / 2**20:,.0f} MiB") if "memory" in ln else fmts[name])
                               for ln, pl in lines.items()]
            row += [ratio_cell(s[k][i]) for _, k in ratios]
            out.append("| " + " | ".join(row) + " |")
    if doc.get("plots_missing"):
        out += ["", f"(The plots were not drawn: {doc['plots_missing']}.)"]
    return out


def plots(doc, out_dir):
    """Draws the four SVGs; returns None, or why they were not drawn."""
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed (scripts/deps.sh report)"
    matplotlib.use("svg")
    matplotlib.rcParams["svg.hashsalt"] = "dagsim"  # stable ids: a rerun on the same data diffs clean
    import matplotlib.pyplot as plt
    for name, (svg, title, xlabel, ylabel, xfmt, aims) in PLOTS.items():
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs_all = set()
        for label, points in doc["growth"][name]["lines"].items():
            if "memory" in label:
                continue
            pts = [p for p in points if p["y"] is not None]
            if not pts:
                continue
            xs_all.update(p["x"] for p in pts)
            med = [p["y"]["median"] for p in pts]
            err = [[m - p["y"]["min"] for m, p in zip(med, pts)], [p["y"]["max"] - m for m, p in zip(med, pts)]]
            ax.errorbar([p["x"] for p in pts], med, yerr=err, marker="o", capsize=3, label=label)
        for x, y, label in aims:
            ax.plot([x], [y], marker="x", color="red", markersize=10, linestyle="none", label=label)
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
        if xs_all:
            ticks = sorted(xs_all | {x for x, _, _ in aims})
            ax.set_xticks(ticks, [xfmt(x) for x in ticks], rotation=30 if len(ticks) > 6 else 0)
            ax.minorticks_off()
        else:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, svg), metadata={"Date": None})
        plt.close(fig)
    return None
