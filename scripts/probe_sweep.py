#!/usr/bin/python3
"""Which code probes the examples' default sweeps reach (issue 52 item 5): reports/probes.md.

Runs `dagsim check FILE --probes --json` over every simulated example (scenarios/examples/*.toml,
each with check's default seeds 1..10), and with --tcp also `dagsim run FILE
--transport tcp --json` once for each example that runs over TCP, so the transport's, the TCP
store's and the launcher's probes (which count only in real processes) have a chance. Adds up, per
probe, the seeds that hit it and the examples they came from, and lists the probes no example
reached. The list of every probe is the build's own (check --json's probes_never_hit plus those
hit), so a probe added anywhere shows up here without registration.

Usage: scripts/probe_sweep.py [--dagsim build/dagsim] [--seeds 1..10] [--tcp] [--out reports/probes.md]
"""
import argparse
import glob
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Examples that need what CI's machine lacks or that are not simulated sweeps: the GPU examples run
# on the simulated GPU (they sweep like any other); jobs/ are real processes (their own tier).
TCP_EXAMPLES = ["seed_example.toml", "elastic_training.toml", "elastic_store_death.toml",
                "rendezvous_formation.toml", "mlp_partition.toml", "faulty_messages.toml",
                "rref_forks.toml", "tcp/rendezvous_etcd_formation.toml", "tcp/rendezvous_etcd_restart.toml"]


# Why a probe no example reaches stays unreached, and what would reach it: by name prefix, the
# longest match wins. Kept here so the regenerated report keeps saying it.
WHY_NOT = [
    ("etcd.", "etcd's rare replies (a txn whose reply was lost, a watch cut by compaction, a broken stream) need an etcd restart or compaction during a join: conformance's etcd_restart_property_test and etcd_lost_reply_test reach them; the tcp/ etcd examples reach only a few"),
    ("launch.", "only in `dagsim launch` processes (a signal, an unwritable --events file, a clashing --node_rank, a store host that dies): the launch CLI tests and [job] runs reach them, and a job run does not collect its agents' counts"),
    ("rendezvous.c10d_", "only in `dagsim launch`'s C10d backend over a real TCPStore (launch tests)"),
    ("rendezvous.store_unreachable", "only in `dagsim launch`'s C10d backend over a real TCPStore (launch tests)"),
    ("rendezvous.join_", "a late joiner with a short join_timeout, or a join rolled back by a store error mid-op"),
    ("rendezvous.op_timed_out", "a rendezvous op outlasting its timeout: a store paused past join_timeout"),
    ("rendezvous.exit_timed_out", "an exit op outlasting its timeout: a store paused while a node leaves"),
    ("rendezvous.spare_", "rendezvous_redundant with a participant's death (a spare taking its place)"),
    ("rendezvous.waiting_node_expired", "a node dying while on the wait list"),
    ("rendezvous.last_call_cancelled", "a node dying during the last call, below min_nodes"),
    ("rendezvous.state_lost_by_store", "a store restarted empty mid-round (a wiping restart in the store-outage family)"),
    ("rendezvous.token_ahead", "a store restarted empty mid-round (a wiping restart in the store-outage family)"),
    ("rendezvous.write_refused", "a store restarted empty mid-round (a wiping restart in the store-outage family)"),
    ("rendezvous.corrupt_state_read", "only forged store values (hostile-input tests)"),
    ("rendezvous.reply_older_than_cached", "only reordered store replies (hostile-input tests)"),
    ("rpc.timeout", "a crash or partition longer than the RPC timeout"),
    ("rpc.rref_", "rref_forks with kills of an RRef's owner or parent mid-fork"),
    ("rpc.bad_frame", "hostile frames only (the hostile-input suites and fuzz targets)"),
    ("rpc.", "admission limits or overload (a small max_pending), or a peer's death at a precise moment"),
    ("dist_autograd.", "an originator killed mid-backward, a crashed (not killed) peer, or a long partition during a context's release"),
    ("elastic.exit_barrier", "a member dying after its group succeeded"),
    ("elastic.", "an agent's rarer ends (an unhealthy group, a signal, a failed close or shutdown, the store host's linger): the elastic agent's unit tests and dagsim launch"),
    ("net.", "the TCP transport's rarer paths (refused or timed-out handshakes, MAC failures, shed connections): the transport's own tests and hostile-input suites; `--tcp` runs reach the common ones"),
    ("store.tcpstore_", "PyTorch's TCPStore protocol, served by `dagsim store` and `dagsim launch` (the tcpstore tests), never by the simulator"),
    ("store.", "the store's rarer waits (a wait or watch abandoned by its client, a delta against a stale base): store outages with many watchers"),
    ("sim.", "a partition that holds or refuses a connection, or a silent connection's timeout: heartbeat_chaos-like scenarios with partitions"),
    ("launch.tcp_", "the TCP launcher's rarer node lives (a node dead before its hello, reports out of order): tcp runs with kills"),
]


def why_not(probe):
    best = ""
    reason = "no example exercises this branch"
    for prefix, text in WHY_NOT:
        if probe.startswith(prefix) and len(prefix) > len(best):
            best, reason = prefix, text
    return reason


def run_json(cmd):
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        print(f"probe_sweep: no JSON from {' '.join(cmd)} (exit {out.returncode})", file=sys.stderr)
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dagsim", default=os.path.join(ROOT, "build", "dagsim"))
    ap.add_argument("--seeds", default="1..10")
    ap.add_argument("--tcp", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "reports", "probes.md"))
    args = ap.parse_args()

    # tcp/'s examples run only over TCP (etcd is an outside service): --tcp runs them.
    examples = sorted(glob.glob(os.path.join(ROOT, "scenarios/examples/*.toml")))
    seeds_hit = {}   # probe -> seeds (summed over examples)
    hits = {}        # probe -> hits
    where = {}       # probe -> {example}
    every = set()
    failed = []
    for path in examples:
        rel = os.path.relpath(path, ROOT)
        d = run_json([args.dagsim, "check", rel, "--seeds", args.seeds, "--probes", "--json", "--no-progress"])
        if d is None:
            failed.append(rel)
            continue
        bad = d.get("failed")
        if bad:
            count = len(bad) if isinstance(bad, list) else bad
            failed.append(f"{rel} ({count} seeds failed)")
        every.update(d.get("probes_never_hit", []))
        for name, v in d.get("probes", {}).items():
            every.add(name)
            if v["seeds"] == 0:
                continue
            seeds_hit[name] = seeds_hit.get(name, 0) + v["seeds"]
            hits[name] = hits.get(name, 0) + v["hits"]
            where.setdefault(name, set()).add(os.path.basename(rel))
        print(f"probe_sweep: {rel}: {sum(1 for v in d.get('probes', {}).values() if v['seeds'])} probes", file=sys.stderr)
    tcp_runs = []
    if args.tcp:
        for name in TCP_EXAMPLES:
            rel = "scenarios/examples/" + name
            d = run_json([args.dagsim, "run", rel, "--seed", "1", "--transport", "tcp", "--json"])
            if d is None:
                failed.append(rel + " (tcp)")
                continue
            tcp_runs.append(rel)
            for probe, count in d.get("probes", {}).items():
                every.add(probe)
                if count:
                    seeds_hit[probe] = seeds_hit.get(probe, 0) + 1
                    hits[probe] = hits.get(probe, 0) + count
                    where.setdefault(probe, set()).add(os.path.basename(rel) + " (tcp)")
            print(f"probe_sweep: {rel} over tcp: {len(d.get('probes', {}))} probes", file=sys.stderr)

    never = sorted(p for p in every if p not in seeds_hit)
    lines = ["# Code probes reached by the examples' default sweeps", "",
             "Generated by `scripts/probe_sweep.py" + (" --tcp" if args.tcp else "") + "`: `dagsim check FILE --seeds "
             + args.seeds + " --probes --json` over every simulated example in scenarios/examples/"
             + (", and one `dagsim run FILE --transport tcp` of " + ", ".join(os.path.basename(r) for r in tcp_runs)
                if tcp_runs else "") + ". A probe (`DAGSIM_PROBE(\"area.name\")`) marks a rare branch worth reaching; "
             "the list of every probe is the build's own.", "",
             f"**{len(every)} probes; {len(seeds_hit)} reached, {len(never)} never.**", ""]
    if failed:
        lines += ["Sweeps that did not pass or gave no JSON: " + ", ".join(failed), ""]
    areas = sorted({p.split(".")[0] for p in every})
    lines += ["| area | probes | reached |", "|---|---|---|"]
    for a in areas:
        mine = [p for p in every if p.split(".")[0] == a]
        lines.append(f"| {a} | {len(mine)} | {sum(1 for p in mine if p in seeds_hit)} |")
    lines += ["", "## Reached", "", "| probe | seeds | hits | examples |", "|---|---|---|---|"]
    for p in sorted(seeds_hit):
        lines.append(f"| `{p}` | {seeds_hit[p]} | {hits[p]} | {', '.join(sorted(where[p]))} |")
    lines += ["", "## Never reached, and what would reach them", "",
              "| probe | why no example reaches it, and what would |", "|---|---|"]
    lines += [f"| `{p}` | {why_not(p)} |" for p in never]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"probes": sorted(every), "reached": {p: {"seeds": seeds_hit[p], "hits": hits[p],
                   "examples": sorted(where[p])} for p in sorted(seeds_hit)}, "never": never}, f, indent=1)
    print(f"probe_sweep: {len(seeds_hit)}/{len(every)} probes reached; {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
