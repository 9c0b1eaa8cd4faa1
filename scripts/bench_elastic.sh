#!/usr/bin/env bash
# Elastic training's figures (issue 12 item 6), written to reports/elastic.json and reports/elastic.md:
#   simulator  dagsim_bench's BM_ElasticTraining* (Google Benchmark, JSON): the main job's example
#              (8 agents, 300 steps, two deaths and a late join) and the same job without faults:
#              wall time per whole run, virtual time, virtual time per committed step, and each
#              death's recovery (from it to the first step of the re-formed group);
#   TCP        K runs of each over `dagsim run --transport tcp --json` (9 processes on this host):
#              wall time per run, wall time per committed step (between the first and the last
#              commit), and the recoveries, on the scenario's clock (real time since the run began);
#   PyTorch    its re-formation time on this machine, read from reports/rendezvous_tcp.json
#              (scripts/bench_rendezvous_tcp.sh ran PyTorch 1.13's c10d rendezvous with keep-alive
#              1 s x 2, the example's setting): rendezvous alone, no training, against dagsim's
#              death-to-first-step, which includes the checkpoint's load and the parameters' move.
# Promises: builds nothing (build dagsim and dagsim_bench first); every figure in the report comes
# from the JSON this run wrote (and, for PyTorch, from reports/rendezvous_tcp.json, cited with its
# date); a run that fails is recorded with its output, not retried; runs under
# /tmp/dagsim-build.lock when flock is there, so no build shares the two cores with a run.
# Usage: scripts/bench_elastic.sh [BUILD_DIR]   (default: build)   Env: DAGSIM_ELASTIC_RUNS (default 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
build=$(cd "$build" && pwd)
cd "$root"
[ -x "$build/dagsim" ] && [ -x "$build/bench/dagsim_bench" ] || { echo "bench_elastic.sh: build dagsim and dagsim_bench first" >&2; exit 1; }
runs=${DAGSIM_ELASTIC_RUNS:-5}
lock=()
if command -v flock >/dev/null; then lock=(flock /tmp/dagsim-build.lock); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The fault-free job: the example up to its first action (no late join, no faults), its params check.
sed -n '/^\[\[elastic.rendezvous.actions\]\]/q;p' scenarios/examples/elastic_training.toml >"$tmp/fault_free.toml"
printf '\n[[checks]]\nkind = "params_match_local"\n' >>"$tmp/fault_free.toml"

echo "simulator: dagsim_bench --benchmark_filter=Elastic" >&2
"${lock[@]}" "$build/bench/dagsim_bench" --benchmark_filter=Elastic --benchmark_repetitions=5 \
  --benchmark_format=json >"$tmp/sim.json"

: >"$tmp/tcp.jsonl"
for case in example fault_free; do
  toml=scenarios/examples/elastic_training.toml
  [ "$case" = example ] || toml="$tmp/fault_free.toml"
  for k in $(seq 1 "$runs"); do
    rc=0
    "${lock[@]}" timeout --kill-after=10 300 "$build/dagsim" run "$toml" --transport tcp --json --seed "$k" \
      >"$tmp/out.json" 2>"$tmp/err.txt" || rc=$?
    echo "tcp $case run $k: rc $rc" >&2
    /usr/bin/python3 - "$case" "$k" "$rc" "$tmp/out.json" "$tmp/err.txt" >>"$tmp/tcp.jsonl" <<'EOF'
import json, sys
case, k, rc, out, err = sys.argv[1:]
row = {"case": case, "run": int(k), "rc": int(rc)}
try:
    d = json.load(open(out))
    e = d["elastic"]
    row.update(passed=d["passed"], wall_ms=d["wall_ms"], committed=e["committed"], commits=e["commits"],
               rounds=len(d["rendezvous"]), first_commit_ms=e.get("first_commit_ms"), last_commit_ms=e.get("last_commit_ms"),
               recoveries=e["recoveries"], provenance=d["provenance"])
    if e["commits"] > 1:
        row["ms_per_step"] = (e["last_commit_ms"] - e["first_commit_ms"]) / (e["commits"] - 1)
except Exception as ex:
    row.update(passed=False, error=str(ex), stderr_tail=open(err, errors="replace").read()[-2000:])
print(json.dumps(row))
EOF
  done
done

/usr/bin/python3 - "$tmp/sim.json" "$tmp/tcp.jsonl" "$runs" <<'EOF'
import json, statistics, subprocess, sys, datetime
sim_path, tcp_path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
sim = json.load(open(sim_path))
tcp = [json.loads(l) for l in open(tcp_path)]
def med(xs):
    xs = [x for x in xs if x is not None]
    return {"n": len(xs), "median": statistics.median(xs), "min": min(xs), "max": max(xs)} if xs else None
bench = {}
for b in sim["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    name = b["run_name"].replace("BM_", "")
    bench[name] = {"wall_ms_per_run": b["real_time"], "virtual_ms": b["virtual_ms"], "last_commit_ms": b["last_commit_ms"],
                   "virtual_ms_per_step": b["virtual_ms_per_step"], "kill_recovery_ms": b["kill_recovery_ms"],
                   "crash_recovery_ms": b["crash_recovery_ms"], "rounds": b["rounds"]}
summary = {}
for case in ("example", "fault_free"):
    rows = [r for r in tcp if r["case"] == case]
    ok = [r for r in rows if r.get("passed")]
    rec = {}
    for r in ok:
        for x in r["recoveries"]:
            if "recovery_ms" in x:
                rec.setdefault(f'{x["fault"]} {x["node"]}', []).append(x["recovery_ms"])
    summary[case] = {"runs": len(rows), "passed": len(ok), "wall_ms": med([r["wall_ms"] for r in ok]),
                     "ms_per_step": med([r.get("ms_per_step") for r in ok]), "last_commit_ms": med([r["last_commit_ms"] for r in ok]),
                     "rounds": med([r["rounds"] for r in ok]), "recovery_ms": {k: med(v) for k, v in rec.items()}}
pt = json.load(open("reports/rendezvous_tcp.json"))
def pytorch(case_id):
    for c in pt["cases"]:
        if c["id"] == case_id and c["system"] == "pytorch":
            return c["summary"]["reform_ms"]
pytorch_ref = {"survivors_agent_restart_ka2": pytorch("agent_restart"), "replacement_ka2": pytorch("replacement"),
               "source": "reports/rendezvous_tcp.json", "measured": pt.get("dagsim_binary_built"), "torch": pt.get("torch")}
head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
report = {"generated_by": "scripts/bench_elastic.sh", "tree_head": head, "machine": sim.get("context", {}),
          "simulator": bench, "tcp": summary, "tcp_runs": tcp, "pytorch_reform": pytorch_ref}
json.dump(report, open("reports/elastic.json", "w"), indent=1)

ex, ff = summary["example"], summary["fault_free"]
pa = pytorch_ref["survivors_agent_restart_ka2"]["median"]
pr = pytorch_ref["replacement_ka2"]["median"]
se, sf = bench.get("ElasticTrainingExample_median", bench.get("ElasticTrainingExample")), bench.get("ElasticTrainingFaultFree_median", bench.get("ElasticTrainingFaultFree"))
def f(x, d=1):
    return "-" if x is None else f"{x:,.{d}f}"
def m(s, d=1):
    return "-" if not s else f'{s["median"]:,.{d}f} ({s["min"]:,.{d}f}-{s["max"]:,.{d}f})'
lines = [
"# Elastic training: figures",
"",
f"Generated by `scripts/bench_elastic.sh` at {head} on {datetime.date.today()} (this machine: {sim['context'].get('num_cpus')} CPUs, "
f"{sim['context'].get('mhz_per_cpu')} MHz; medians, with min-max where there are several runs). The job is "
"`scenarios/examples/elastic_training.toml`: 8 agents (9 nodes with the store), an 8-layer perceptron (16 wide, batch 16, "
"SGD with momentum), 300 steps, each committed to the store with its optimizer state; worker3 killed at 2 s, worker6 "
"crashed at 8 s and back at 9 s, worker8 joining at 5 s; keep-alive 1 s x 2, last call 0.5 s. *Fault-free* is the same "
"job without the faults and the late join.",
"",
"## Simulator (Google Benchmark, 5 repetitions)",
"",
"| job | wall per run | virtual time to the end | last commit (virtual) | virtual per step | rounds |",
"|---|---|---|---|---|---|",
f"| example | {f(se['wall_ms_per_run'])} ms | {f(se['virtual_ms'])} ms | {f(se['last_commit_ms'])} ms | {f(se['virtual_ms_per_step'],2)} ms | {f(se['rounds'],0)} |",
f"| fault-free | {f(sf['wall_ms_per_run'])} ms | {f(sf['virtual_ms'])} ms | {f(sf['last_commit_ms'])} ms | {f(sf['virtual_ms_per_step'],2)} ms | {f(sf['rounds'],0)} |",
"",
"Virtual time to the end includes the drain after the last agent (connection timeout + 20 latencies + 1 s).",
"",
f"## TCP ({runs} runs of each, 9 processes on this host)",
"",
"| job | passed | wall per run | last commit | wall per committed step | rounds |",
"|---|---|---|---|---|---|",
f"| example | {ex['passed']}/{ex['runs']} | {m(ex['wall_ms'],0)} ms | {m(ex['last_commit_ms'],0)} ms | {m(ex['ms_per_step'],2)} ms | {m(ex['rounds'],0)} |",
f"| fault-free | {ff['passed']}/{ff['runs']} | {m(ff['wall_ms'],0)} ms | {m(ff['last_commit_ms'],0)} ms | {m(ff['ms_per_step'],2)} ms | {m(ff['rounds'],0)} |",
"",
"## From a death to the re-formed group's first step, against PyTorch's re-formation",
"",
"dagsim: from the fault to the first step committed by a later round (end to end: failure seen, rendezvous, checkpoint "
"loaded, parameters and optimizer state moved to their new owners, one step trained and committed). PyTorch 1.13: its "
"c10d rendezvous re-forming after a kill on this machine, rendezvous alone (reports/rendezvous_tcp.md, keep-alive 1 s x 2).",
"",
"| | dagsim, simulator | dagsim, TCP | PyTorch 1.13 re-formation (TCP) |",
"|---|---|---|---|",
]
for key, label, simkey in (("kill worker3", "kill of worker3 (dead for good: the six survivors re-form)", "kill_recovery_ms"),
                           ("crash worker6", "crash of worker6 (silent; back as a fresh node 1 s later)", "crash_recovery_ms")):
    tcpv = ex["recovery_ms"].get(key)
    ref = f"{pa:,.0f} ms (survivors re-form)" if key.startswith("kill") else f"{pr:,.0f} ms (a fresh node replaces the dead one)"
    lines.append(f"| {label} | {f(se[simkey],0)} ms | {m(tcpv,0)} ms | {ref} |")
if tcp and ex["recovery_ms"].get("kill worker3"):
    ratio = pa / ex["recovery_ms"]["kill worker3"]["median"]
    lines += ["", f"Ratio, PyTorch's re-formation over dagsim's death-to-first-step after the kill, over TCP: {ratio:.2f}x."]
lines += ["", "Every figure above comes from reports/elastic.json, which this run wrote (the PyTorch column from reports/rendezvous_tcp.json)."]
open("reports/elastic.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
