"""PyTorch's own elastic stack judged by dagsim's invariant checker, from job scenarios (issue 51,
formerly a script's hard-coded cases).

Each case is a pair of [job] scenarios, scenarios/examples/jobs/elastic/CASE.torchrun.toml and
CASE.dagsim.toml: the same agents, flags, faults and worker (scripts/elastic_sleeper.py, which
lives until the job's end, so the rendezvous is all there is to see), under torchrun 1.13 and under
`dagsim launch`. Every run is `dagsim run FILE --seed 1 --records OUT/CASE/SYSTEM.RUN --json`: the
run starts a `dagsim store --record`, the agents, strikes the faults, and judges the store's record
(S1-S7, S10, L1, L2, L5, L6 by dagsim's rule). Runs alternate torchrun and dagsim.

Writes OUT/matrix.json (every run's verdict, times and exits; the cases as the TOML files state
them) for scripts/pytorch_elastic_report.py, and leaves each run's folder: OUT/CASE/SYSTEM.RUN/
(store/store.jsonl and store/job.json replay with `dagsim judge OUT/CASE/SYSTEM.RUN/store`).

Usage: pytorch_elastic_jobs.py DAGSIM OUT [--runs K] [--cases a,b] [--systems torchrun,dagsim]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES_DIR = os.path.join(ROOT, "scenarios", "examples", "jobs", "elastic")


def case_of(path):
    """The case as pytorch_elastic_report.py describes it, read from the scenario file."""
    with open(path, "rb") as f:
        s = tomllib.load(f)
    job = s["job"]
    cmd = job["command"]
    seconds = float(cmd[cmd.index("--job-seconds") + 1])
    faults = []
    for f in s.get("faults", []):
        at = f.get("at_ms", 0) / 1000
        node = int(f["node"].replace("agent", "")) if "node" in f else None
        if f["kind"] == "kill":
            faults.append(["kill", node, at])
        elif f["kind"] == "pause":
            faults.append(["pause", node, at, f["resume_after_ms"] / 1000])
        elif f["kind"] == "store_pause":
            faults.append(["store_pause", at, f["resume_after_ms"] / 1000])
        else:
            faults.append([f["kind"], node, at])
    for j in job.get("late_joins", []):
        faults.append(["join", int(j["agent"].replace("agent", "")), j.get("at_ms", 0) / 1000])
    faults.sort(key=lambda x: x[2] if x[0] != "store_pause" else x[1])
    return {"agents": job["agents"], "nnodes": job["nnodes"], "seconds": seconds, "faults": faults,
            "conf": job.get("rdzv_conf", {}), "file": os.path.relpath(path, ROOT)}


def exit_text(data):
    if data.get("stopped_by_run"):
        return "stopped at the run's timeout"
    e = data.get("exit")
    if e is None:
        return "no exit"
    if "code" in e:
        return e["code"]
    return {"SIGKILL": -9, "SIGTERM": -15}.get(e.get("signal"), e.get("signal"))


def run_one(dagsim, path, name, system, out):
    if os.path.exists(out):
        subprocess.run(["rm", "-rf", out], check=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    p = subprocess.run([dagsim, "run", path, "--seed", "1", "--records", out, "--json"], capture_output=True, text=True)
    with open(out + ".stderr", "w") as f:
        f.write(p.stderr)
    base = {"case": name, "system": system, "dir": os.path.join(out, "store"), "run_dir": out, "exit": p.returncode}
    try:
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
    except (OSError, ValueError) as e:
        return dict(base, error="no run.json (dagsim run exited %d): %s %s" % (p.returncode, e, p.stderr.strip()[-300:]),
                    exit_codes={})
    job = run.get("job") or {}
    codes = {}
    for path_ in sorted(glob.glob(os.path.join(out, "nodes", "*.json"))):
        with open(path_) as f:
            rec = json.load(f)
        label = os.path.basename(path_)[:-5]  # agent3.0
        codes[label] = exit_text(rec.get("data", rec))
    store = job.get("store") or {}
    report = store.get("report")
    if store.get("error") or not isinstance(report, dict):
        return dict(base, error="the store's record was not judged: %s" % (store.get("error") or "no report"),
                    exit_codes=codes)
    checks = {}
    try:
        checks = {c["name"]: c["passed"] for c in json.loads(p.stdout).get("checks", [])}
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return dict(base, passed=not report["violations"], violations=report["violations"], rounds=len(report.get("rounds", [])),
                first_formation_ms=report.get("first_formation_ms"), first_commit_ms=report.get("first_commit_ms"),
                reformations=report.get("reformations", []), live_expired=len(report.get("live_expired", [])),
                exit_codes=codes, outcome=run.get("outcome"), orphans=len(job.get("orphans", [])), checks=checks)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dagsim")
    p.add_argument("out")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--cases", default="")
    p.add_argument("--systems", default="torchrun,dagsim")
    args = p.parse_args()
    dagsim = os.path.abspath(args.dagsim)
    names = sorted({os.path.basename(f).split(".")[0] for f in glob.glob(os.path.join(CASES_DIR, "*.toml"))})
    order = ["formation", "kill", "pause", "late_join", "store_pause", "kill_then_join", "kill_8"]
    names = [n for n in order if n in names] + [n for n in names if n not in order]
    if args.cases:
        wanted = args.cases.split(",")
        unknown = [c for c in wanted if c not in names]
        if unknown:
            sys.exit("no such case: %s (cases: %s)" % (", ".join(unknown), ", ".join(names)))
        names = wanted
    systems = args.systems.split(",")
    cases = {}
    for name in names:
        per = {s: case_of(os.path.join(CASES_DIR, "%s.%s.toml" % (name, s))) for s in systems}
        first = per[systems[0]]
        for s in systems[1:]:
            if {k: v for k, v in per[s].items() if k != "file"} != {k: v for k, v in first.items() if k != "file"}:
                sys.exit("%s: the %s and %s scenarios differ: %s vs %s" % (name, systems[0], s, first, per[s]))
        cases[name] = {k: v for k, v in first.items() if k not in ("conf", "file")}
        cases[name]["files"] = {s: per[s]["file"] for s in systems}
    conf = case_of(os.path.join(CASES_DIR, "%s.%s.toml" % (names[0], systems[0])))["conf"]
    tree = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"
    results = []
    matrix = os.path.join(args.out, "matrix.json")
    os.makedirs(args.out, exist_ok=True)
    for run in range(args.runs):
        for name in names:
            for system in systems:
                out = os.path.join(os.path.abspath(args.out), name, "%s.%d" % (system, run))
                r = run_one(dagsim, os.path.join(CASES_DIR, "%s.%s.toml" % (name, system)), name, system, out)
                r["run"] = run
                results.append(r)
                print(json.dumps({k: r.get(k) for k in ("case", "system", "run", "passed", "first_formation_ms",
                                                        "live_expired", "outcome", "orphans", "error")}), flush=True)
                for v in r.get("violations", [])[:6]:
                    print("   ", v[:220], flush=True)
                with open(matrix, "w") as f:
                    json.dump({"tree": tree, "source": "jobs", "cases": cases, "conf": conf, "results": results}, f,
                              indent=1)


if __name__ == "__main__":
    main()
