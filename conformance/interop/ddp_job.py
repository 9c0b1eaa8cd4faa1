"""An unmodified-style PyTorch training script for `dagsim launch` (issue 24): a gloo process group
from env://, a small MLP under DistributedDataParallel, SGD, a checkpoint after every step, resume
from the last checkpoint. The global batch (24 samples) is the same whatever the world size (each
rank takes its share, and the loss is scaled so DDP's average is the global batch's mean), so an
elastic run that loses and gains workers ends with the parameters of an uninterrupted one, within
float32 rounding.

Usage: ddp_job.py DIR STEPS [STEP_SECONDS]   (under a launcher: DIR holds ckpt.pt and final.json)
       ddp_job.py --reference DIR STEPS     (one process, no launcher: the uninterrupted run)
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

GLOBAL_BATCH = 24  # divisible by every world size the tests use (2, 4, 6, 8)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def save(path, obj):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def reference(out, steps):
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(steps):
        x, y = batch(step)
        opt.zero_grad()
        ((net(x) - y) ** 2).mean().backward()
        opt.step()
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump([p.detach().flatten().tolist() for p in net.parameters()], f)


def train(out, steps, step_seconds):
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    net = model()
    ckpt = os.path.join(out, "ckpt.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        net.load_state_dict(state["model"])
        start = state["step"] + 1
    dist.barrier()  # every rank has read the checkpoint before rank 0 writes the next
    ddp = DistributedDataParallel(net)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    share = GLOBAL_BATCH // world
    with open(os.path.join(out, "pids"), "a") as f:
        f.write("%d %d %d %s\n" % (os.getpid(), rank, world, os.environ["TORCHELASTIC_RESTART_COUNT"]))
    for step in range(start, steps):
        x, y = batch(step)
        xs, ys = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        opt.zero_grad()
        # DDP averages over the world: scaling by world makes the result the global batch's mean.
        (((ddp(xs) - ys) ** 2).sum() * world / GLOBAL_BATCH).backward()
        opt.step()
        if rank == 0:
            save(ckpt, {"step": step, "model": net.state_dict()})
        time.sleep(step_seconds)
    if rank == 0:
        with open(os.path.join(out, "final.json"), "w") as f:
            json.dump([p.detach().flatten().tolist() for p in net.parameters()], f)
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1] == "--reference":
        reference(sys.argv[2], int(sys.argv[3]))
    else:
        train(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
