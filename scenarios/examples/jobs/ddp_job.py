"""A PyTorch DDP training job for dagsim's [job] scenarios (issue 51): what a user's train.py looks
like, with the three habits that make a job survive faults, and one that lets a checker prove it.

- gloo process group from env:// (torchrun's and `dagsim launch`'s environment), a small MLP under
  DistributedDataParallel, SGD.
- A checkpoint after every step, written atomically (a temporary file, then os.replace) to
  $DAGSIM_JOB_DIR/ckpt.pt by rank 0; every restarted worker group resumes from it.
- Deterministic data: step N's global batch comes from a generator seeded by N alone, each rank
  takes its share, and the loss is scaled so DDP's average is the global batch's mean. So the final
  parameters equal an uninterrupted run's (within float32 rounding), whatever world sizes the run
  went through and whichever steps were retried.
- A record of what it did, for check_resume.py: rank 0 appends one line per committed step to
  $DAGSIM_JOB_DIR/steps.log ("STEP attempt=A restart=R world=W pid=P"), one line per worker start
  to attempts.log, and writes final.json (the step count, every parameter, a digest) at the end.

Every rank prints one line per step, after the step's checkpoint is on disk:
    step N loss L world W restart R
so a scenario can strike a fault after a given step: when = { output = "step 5 loss", from = "agent1:0" }.

Usage (under a launcher): ddp_job.py [--steps 30] [--step-seconds 0.3] [--dir DIR]
DIR defaults to $DAGSIM_JOB_DIR (the run's folder dagsim gives every worker), else the current one.
"""
import argparse
import datetime
import hashlib
import json
import os
import struct
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

GLOBAL_BATCH = 24  # the same whatever the world size; shares need not be equal


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def save_atomically(path, obj):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    torch.save(obj, tmp)
    os.replace(tmp, path)


def append_line(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def params_of(net):
    return [p.detach().flatten().tolist() for p in net.parameters()]


def digest(params):
    h = hashlib.sha256()
    for p in params:
        h.update(struct.pack("<%df" % len(p), *p))
    return h.hexdigest()[:16]


def resume_step(state):
    """The first step to run after a checkpoint of `state["step"]`: the one after it."""
    return state["step"] + 1


def logged_steps(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(line.split()[0]) for line in f if line.strip()]


def gloo_interface():
    """Gloo binds to the address this host's name resolves to; where that is loopback but the
    master is elsewhere (each agent in its own network namespace, as a partition needs), name the
    interface that routes to the master, as a multi-host job sets GLOO_SOCKET_IFNAME."""
    master = os.environ.get("MASTER_ADDR", "")
    if "GLOO_SOCKET_IFNAME" in os.environ or not master or master.startswith("127.") or master == "localhost":
        return
    import socket
    import subprocess
    try:
        if not socket.gethostbyname(socket.gethostname()).startswith("127."):
            return
        # The master's own interface, if it is here; else the one its route leaves by.
        for line in subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"], capture_output=True,
                                   text=True, timeout=5).stdout.splitlines():
            f = line.split()
            if len(f) > 3 and f[3].split("/")[0] == master:
                os.environ["GLOO_SOCKET_IFNAME"] = f[1]
                return
        route = subprocess.run(["ip", "-o", "route", "get", master], capture_output=True, text=True, timeout=5).stdout.split()
        if "dev" in route and route[route.index("dev") + 1] != "lo":
            os.environ["GLOO_SOCKET_IFNAME"] = route[route.index("dev") + 1]
    except (OSError, subprocess.SubprocessError):
        pass


def train(out, steps, step_seconds, timeout_s, resume=resume_step):
    gloo_interface()
    # A peer that dies or stops mid-allreduce fails this rank within timeout_s (gloo's default is
    # 30 minutes), so the agent sees the failure and restarts the group.
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    ckpt = os.path.join(out, "ckpt.pt")
    steps_log = os.path.join(out, "steps.log")
    attempts_log = os.path.join(out, "attempts.log")

    net = model()
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        net.load_state_dict(state["model"])
        start = resume(state)
    attempt = 0
    if rank == 0:
        if os.path.exists(attempts_log):
            with open(attempts_log) as f:
                attempt = sum(1 for line in f if " rank=0 " in line)
        # A kill between the checkpoint's os.replace and the log's append leaves a committed step
        # unlogged: log it now, so steps.log is exactly the steps the checkpoints committed.
        if os.path.exists(ckpt):
            done = logged_steps(steps_log)
            if not done or done[-1] < state["step"]:
                append_line(steps_log, "%d attempt=%d restart=%d world=%d pid=%d (logged on resume)" % (
                    state["step"], max(attempt - 1, 0), restart, world, os.getpid()))
    append_line(attempts_log, "pid=%d rank=%d world=%d restart=%d start=%d" % (os.getpid(), rank, world, restart, start))
    print("worker rank %d of %d (restart %d) resumes at step %d" % (rank, world, restart, start), flush=True)
    dist.barrier()  # every rank has read the checkpoint before rank 0 writes the next

    ddp = DistributedDataParallel(net)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    lo, hi = rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world
    for step in range(start, steps):
        x, y = batch(step)
        opt.zero_grad()
        # DDP averages the ranks' gradients: scaling by world / GLOBAL_BATCH makes the sum of the
        # shares' squared errors the global batch's mean.
        local = ((ddp(x[lo:hi]) - y[lo:hi]) ** 2).sum()
        (local * world / GLOBAL_BATCH).backward()
        opt.step()
        total = local.detach().clone()
        dist.all_reduce(total)
        if rank == 0:
            save_atomically(ckpt, {"step": step, "model": net.state_dict()})
            append_line(steps_log, "%d attempt=%d restart=%d world=%d pid=%d" % (step, attempt, restart, world, os.getpid()))
        print("step %d loss %.6f world %d restart %d" % (step, total.item() / GLOBAL_BATCH, world, restart), flush=True)
        time.sleep(step_seconds)
    if rank == 0:
        params = params_of(net)
        final = {"steps": steps, "last_step": steps - 1, "digest": digest(params), "world": world,
                 "restart": restart, "params": params}
        tmp = os.path.join(out, "final.json.tmp")
        with open(tmp, "w") as f:
            json.dump(final, f)
        os.replace(tmp, os.path.join(out, "final.json"))
        print("done: %d steps, params digest %s" % (steps, final["digest"]), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--step-seconds", type=float, default=0.3, help="sleep after each step, so faults can land")
    p.add_argument("--timeout-seconds", type=float, default=30.0, help="the process group's timeout")
    p.add_argument("--dir", default=os.environ.get("DAGSIM_JOB_DIR", "."),
                   help="where ckpt.pt, steps.log and final.json go (default: $DAGSIM_JOB_DIR)")
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    os.makedirs(args.dir, exist_ok=True)
    train(args.dir, args.steps, args.step_seconds, args.timeout_seconds)
