"""What the tests that run ddp_job.py under `dagsim launch` share (launch_ddp.py on one host,
conformance/multihost/multihost_test.py across network namespaces): watching the job's checkpoint
and its workers' starts, the logs for a failure's message, and the final verdict against an
uninterrupted run.

ddp_job.py writes, in its output folder: ckpt.pt after every step (rank 0), one line per worker
start to `pids` ("pid rank world restart_count"), and final.json at the end.
"""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DDP_JOB = os.path.join(HERE, "ddp_job.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checkpointed(out):
    """The last step ckpt.pt holds, or -1 before the first (or while it cannot be read)."""
    import torch
    try:
        return torch.load(os.path.join(out, "ckpt.pt"))["step"]
    except Exception:
        return -1


def worker_starts(out):
    """Every worker start so far, in order: (pid, rank, world, restart_count)."""
    try:
        with open(os.path.join(out, "pids")) as f:
            return [tuple(int(x) for x in line.split()) for line in f if len(line.split()) == 4]
    except FileNotFoundError:
        return []


def show_logs(out):
    """The agents' logs and every worker's, for a failure's message."""
    for root, _, files in os.walk(out):
        for name in sorted(files):
            if name.endswith(".log"):
                with open(os.path.join(root, name), errors="replace") as f:
                    lines = [l for l in f.readlines() if "rank" not in l or "done" not in l][-12:]
                print("--- %s:\n%s" % (os.path.relpath(os.path.join(root, name), out), "".join(lines)))
    if os.path.exists(os.path.join(out, "pids")):
        with open(os.path.join(out, "pids")) as f:
            print("--- worker starts (pid rank world restart_count):\n" + f.read())


def wait_for_step(out, step, agents, deadline):
    while checkpointed(out) < step:
        if time.time() > deadline or all(a.poll() is not None for a in agents):
            show_logs(out)
            sys.exit("FAIL: step %d was never checkpointed (%s)" % (step, [a.poll() for a in agents]))
        time.sleep(0.1)


def check_against_reference(out, steps):
    """Runs ddp_job.py --reference and exits FAIL unless final.json equals its parameters within
    float32 tolerance."""
    subprocess.run(["/usr/bin/python3", DDP_JOB, "--reference", out, str(steps)], check=True)
    with open(os.path.join(out, "final.json")) as f:
        final = json.load(f)
    with open(os.path.join(out, "reference.json")) as f:
        ref = json.load(f)
    worst = max(abs(a - b) / max(1.0, abs(b)) for fa, fb in zip(final, ref) for a, b in zip(fa, fb))
    print("largest relative difference from the uninterrupted run: %.3g" % worst)
    if worst > 1e-4:
        sys.exit("FAIL: the parameters differ from the uninterrupted run's")
