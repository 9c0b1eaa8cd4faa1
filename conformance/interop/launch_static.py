"""torchrun's default backend, static, under torchrun 1.13 and `dagsim launch` with the same flags
(issue 50 item 1): two agents as two simulated hosts on loopback, each given
`--nnodes 2 --node_rank R --master_addr 127.0.0.1 --master_port P --nproc_per_node 2`, run the same
gloo DistributedDataParallel job (ddp_job.py, 6 steps, a checkpoint each step). Both launchers must
succeed, give the same four (rank, world size) pairs, and end with the parameters of an
uninterrupted run. (Which agent holds which ranks, and every other variable, is launch_env.py's
static mode: each worker's GROUP_RANK is its agent's --node_rank under both.)

Each launcher also runs with the agents started in the other order (node rank 1 first): a static
agent waits for node rank 0's store, as torchrun's TCPStore client retries its connect.

Usage: launch_static.py DAGSIM   (with /usr/bin/python3, which has torch). Prints one line per
run with its wall time (the first agent started to the last agent's exit, importing torch and the
6 steps included) and exits 1 naming any difference.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_harness import DDP_JOB, check_against_reference, free_port, show_logs, worker_starts  # noqa: E402

STEPS = 6


def run(launcher, name, tmp, first):
    out = os.path.join(tmp, name)
    os.makedirs(out)
    port = free_port()
    # PATH first names the Python that has torch: torchrun's workers run sys.executable, dagsim's
    # run python3 from PATH (its --python is the same flag for both only by variable: DAGSIM_PYTHON).
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""), DAGSIM_PYTHON="/usr/bin/python3")
    agents = {}
    started = time.time()
    for node_rank in (first, 1 - first):
        # Debian's torchrun 1.13 on Python 3.11 cannot parse -r 0 (its default): -r 1 -t 1 for both.
        flags = ["--nnodes", "2", "--nproc_per_node", "2", "--node_rank", str(node_rank), "--master_addr",
                 "127.0.0.1", "--master_port", str(port), "--rdzv_id", "staticjob", "--log_dir",
                 os.path.join(out, "logs%d" % node_rank), "-r", "1", "-t", "1", DDP_JOB, out, str(STEPS)]
        log = open(os.path.join(out, "agent%d.log" % node_rank), "w")
        agents[node_rank] = subprocess.Popen(launcher + flags, env=env, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(0.5)
    codes = {}
    for node_rank, agent in agents.items():
        try:
            codes[node_rank] = agent.wait(timeout=200)
        except subprocess.TimeoutExpired:
            agent.kill()
            codes[node_rank] = "timeout"
    took = time.time() - started
    problems = []
    if any(c != 0 for c in codes.values()):
        show_logs(out)
        problems.append("%s: agents exited %s" % (name, codes))
    starts = worker_starts(out)
    pairs = sorted((rank, world) for _, rank, world, _ in starts)
    if pairs != [(0, 4), (1, 4), (2, 4), (3, 4)]:
        problems.append("%s: worker (rank, world size) %s, expected ranks 0-3 of 4" % (name, pairs))
    if not problems:
        check_against_reference(out, STEPS)
    return pairs, took, problems


def main():
    dagsim = sys.argv[1]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        problems = []
        for first in (0, 1):
            for name, launcher in (("dagsim", [dagsim, "launch"]),
                                   ("torchrun", ["/usr/bin/python3", "-m", "torch.distributed.run"])):
                label = "%s_first%d" % (name, first)
                pairs, took, found = run(launcher, label, tmp, first)
                results[label] = pairs
                problems += found
                print("launch_static: %-16s node rank %d started first: ranks/world %s, %.1f s in all"
                      % (label, first, pairs, took))
        if results["dagsim_first0"] != results["torchrun_first0"]:
            problems.append("ranks differ: dagsim %s, torchrun %s" % (results["dagsim_first0"], results["torchrun_first0"]))
        for p in problems:
            print("  " + p)
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
