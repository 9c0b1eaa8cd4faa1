"""PyTorch's own elastic stack judged by dagsim's invariant checker (issue 24 item 6).

Each case runs a job of N agents on this host against one `dagsim store --record` (PyTorch 1.13's
TCPStore protocol, every client operation recorded), injects its faults (SIGKILL of an agent,
SIGSTOP/SIGCONT of an agent or of the store, a late joiner), then `dagsim judge` reads the store's
record and the job's settings and faults (job.json) and checks S1-S7, S10, L1, L2, L5, L6. Every case
runs twice, alternating: with torchrun's agents (python3 -m torch.distributed.run, PyTorch's
DynamicRendezvousHandler on its c10d backend) and with `dagsim launch` (dagsim's handler on the
same store), the same flags, the same worker (scripts/elastic_sleeper.py, which lives until the
job's end, so the rendezvous is all there is to see).

Both are judged by dagsim's rule for L6 (a participant that expires from a complete round makes the
survivors re-form); PyTorch 1.13 does not (#111646), and the report says so where it happens.

Writes, under OUT: CASE/SYSTEM.RUN/{store.jsonl, job.json, judge.json, agentI.log}, and
OUT/matrix.json (every run's verdict and times). scripts/pytorch_elastic_report.py turns that
into reports/pytorch_elastic.md. Replay a run's verdict with `dagsim judge OUT/CASE/SYSTEM.RUN`.

Usage: pytorch_elastic_matrix.py DAGSIM OUT [--runs K] [--cases a,b]   (/usr/bin/python3)
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SLEEPER = os.path.join(HERE, "elastic_sleeper.py")

# keep-alive: torchrun 1.13 cannot set it (always 5 s x 3); dagsim launch is given the same.
CONF = {"is_host": "false", "last_call_timeout": "2", "join_timeout": "120",
        "keep_alive_interval": "5", "keep_alive_max_attempt": "3"}

# name: agents at start, late joiners, nnodes, job seconds, faults (seconds after the job's start):
#   ("kill", agent, at) | ("pause", agent, at, for) | ("join", agent, at) | ("store_pause", at, for)
CASES = {
    "formation": dict(agents=4, nnodes="3:4", seconds=14, faults=[]),
    "kill": dict(agents=4, nnodes="2:4", seconds=40, faults=[("kill", 3, 10)]),
    "pause": dict(agents=3, nnodes="2:3", seconds=45, faults=[("pause", 2, 10, 20)]),
    "late_join": dict(agents=3, nnodes="3:4", seconds=30, faults=[("join", 3, 10)]),
    "store_pause": dict(agents=4, nnodes="3:4", seconds=30, faults=[("store_pause", 10, 5)]),
    "kill_then_join": dict(agents=4, nnodes="2:4", seconds=50, faults=[("kill", 3, 10), ("join", 4, 30)]),
    # Killed well after the 8 agents formed (about 11 s on 2 cores): a kill during the agents'
    # worker-info exchange hangs PyTorch's survivors differently (see the closing note of issue 24).
    "kill_8": dict(agents=8, nnodes="4:8", seconds=60, faults=[("kill", 7, 25)]),
}


def agent_cmd(system, dagsim, port, nnodes, deadline):
    flags = ["--nnodes", nnodes, "--nproc_per_node", "1", "--rdzv_backend", "c10d",
             "--rdzv_endpoint", "127.0.0.1:%d" % port, "--rdzv_id", "job", "--max_restarts", "100",
             "--monitor_interval", "1", "--redirects", "1", "--tee", "1",
             "--rdzv_conf", ",".join("%s=%s" % kv for kv in CONF.items())]
    head = ["/usr/bin/python3", "-m", "torch.distributed.run"] if system == "torchrun" else [dagsim, "launch"]
    return head + flags + [SLEEPER, "%.3f" % deadline]


def run_case(name, case, system, dagsim, out):
    os.makedirs(out, exist_ok=True)
    store_log = open(os.path.join(out, "store.log"), "w")
    store = subprocess.Popen([dagsim, "store", "--port", "0", "--record", os.path.join(out, "store.jsonl")],
                             stdout=subprocess.PIPE, stderr=store_log, text=True)
    port = int(store.stdout.readline())
    t0 = time.time()
    deadline = t0 + case["seconds"]
    faults, agents, logs = [], {}, []

    def start(i):
        log = open(os.path.join(out, "agent%d.log" % i), "w")
        logs.append(log)
        agents[i] = subprocess.Popen(agent_cmd(system, dagsim, port, case["nnodes"], deadline),
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def record(kind, pid=None):
        f = {"t": time.time_ns(), "kind": kind}
        if pid is not None:
            f["pid"] = pid
        faults.append(f)

    late = {f[1] for f in case["faults"] if f[0] == "join"}
    for i in range(case["agents"] + len(late)):
        if i not in late:
            start(i)
    # (at, action) in time order
    timeline = []
    for f in case["faults"]:
        if f[0] == "kill":
            timeline.append((f[2], lambda i=f[1]: (record("kill", agents[i].pid), os.killpg(agents[i].pid, signal.SIGKILL))))
        elif f[0] == "pause":
            timeline.append((f[2], lambda i=f[1]: (record("pause", agents[i].pid), os.kill(agents[i].pid, signal.SIGSTOP))))
            timeline.append((f[2] + f[3], lambda i=f[1]: (os.kill(agents[i].pid, signal.SIGCONT), record("resume", agents[i].pid))))
        elif f[0] == "join":
            timeline.append((f[2], lambda i=f[1]: start(i)))
        elif f[0] == "store_pause":
            timeline.append((f[1], lambda: (record("store_pause"), store.send_signal(signal.SIGSTOP))))
            timeline.append((f[1] + f[2], lambda: (store.send_signal(signal.SIGCONT), record("store_resume"))))
    timeline.sort(key=lambda x: x[0])
    for at, action in timeline:
        time.sleep(max(0.0, t0 + at - time.time()))
        action()
    # The job ends at its deadline; agents then finish (exit barrier) or are stopped 30 s later.
    end_by = deadline + 30
    codes = {}
    for i, a in sorted(agents.items()):
        try:
            codes[i] = a.wait(timeout=max(0.1, end_by - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(a.pid, signal.SIGKILL)
            codes[i] = "stopped at the job's end + 30 s"
    store.send_signal(signal.SIGTERM)
    store.wait(timeout=30)
    for log in logs:
        log.close()
    store_log.close()
    low, high = case["nnodes"].split(":")
    job = {"run_id": "job", "min_nodes": int(low), "max_nodes": int(high),
           "join_timeout_s": float(CONF["join_timeout"]), "last_call_timeout_s": float(CONF["last_call_timeout"]),
           "keep_alive_interval_s": float(CONF["keep_alive_interval"]),
           "keep_alive_max_attempt": int(CONF["keep_alive_max_attempt"]),
           "monitor_interval_s": 1.0, "poll_interval_s": 1.0, "rerendezvous_on_expiry": True,
           "faults": faults, "system": system, "case": name, "agents": {str(i): a.pid for i, a in agents.items()},
           "exit_codes": {str(i): c for i, c in codes.items()}, "started_ns": int(t0 * 1e9)}
    with open(os.path.join(out, "job.json"), "w") as f:
        json.dump(job, f, indent=1)
    judged = subprocess.run([dagsim, "judge", out, "--json"], capture_output=True, text=True)
    with open(os.path.join(out, "judge.json"), "w") as f:
        f.write(judged.stdout)
    if judged.returncode not in (0, 1):
        return {"case": name, "system": system, "dir": out, "error": judged.stderr.strip(), "exit_codes": job["exit_codes"]}
    verdict = json.loads(judged.stdout)
    return {"case": name, "system": system, "dir": out, "passed": verdict["passed"],
            "violations": verdict["violations"], "rounds": len(verdict["rounds"]),
            "first_formation_ms": verdict["first_formation_ms"], "first_commit_ms": verdict["first_commit_ms"],
            "reformations": verdict["reformations"],
            "live_expired": len(verdict["live_expired"]), "exit_codes": job["exit_codes"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dagsim")
    p.add_argument("out")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--systems", default="torchrun,dagsim")
    args = p.parse_args()
    dagsim = os.path.abspath(args.dagsim)
    # The sources the binary was built from: this tree's commit, when the build is current.
    tree = subprocess.run(["git", "-C", os.path.dirname(HERE), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"
    results = []
    matrix = os.path.join(args.out, "matrix.json")
    for run in range(args.runs):
        for name in args.cases.split(","):
            for system in args.systems.split(","):
                out = os.path.join(args.out, name, "%s.%d" % (system, run))
                r = run_case(name, CASES[name], system, dagsim, out)
                r["run"] = run
                results.append(r)
                print(json.dumps({k: r.get(k) for k in ("case", "system", "run", "passed", "first_formation_ms",
                                                        "live_expired", "error")}), flush=True)
                for v in r.get("violations", [])[:6]:
                    print("   ", v[:220], flush=True)
                with open(matrix, "w") as f:
                    json.dump({"tree": tree, "cases": CASES, "conf": CONF, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
