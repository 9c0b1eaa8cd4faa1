#!/usr/bin/python3
"""PyTorch's counterpart of each dagsim benchmark that scripts/bench_pytorch.sh compares.

Usage: pytorch_counterparts.py GROUP SECONDS [--sizes B,B,...]
  GROUP   local: the MLP step float32/float64, gemm 256 float32, the engine's cost per node, an
                 embedding lookup with its backward, cross_entropy over 8192 classes, layer_norm,
                 max along a dim
          mlp_width: BM_MlpWidth, the local float32 MLP step at widths 64 to 2048 (growth)
          tcp:   RPC round trips (64 B and 1 MiB, or the payload sizes --sizes names: the
                 growth sweep of scripts/performance_growth.py), the seed example's step and the
                 MLP step in both dtypes, over torch.distributed.rpc (TensorPipe) between two
                 processes on loopback
  SECONDS how long each benchmark runs (after a warm-up of a tenth of that)
  --sizes the RPC payloads in bytes (tcp only); a round trip echoes a float64 tensor of that size,
          as BM_TcpRpc/<bytes>/0 echoes <bytes> of tensor
Prints one JSON object per benchmark on standard output: {"key", "seconds_per_iter", "iterations"},
the key being the dagsim benchmark it stands beside (as Google Benchmark names it). The time is
the mean over the iterations, as Google Benchmark reports ours; one thread (torch.set_num_threads(1),
as our serial OpenBLAS). Each model is what the dagsim benchmark builds: the MLP is 8 layers of
256, batch 64, tanh, weights N(0,1)/16, loss sum, gradients of the weights; the seed step is the
design note's rpc_sync(add), mul, sum, backward, get_gradients on 3x3 tensors.
"""
import json
import os
import socket
import sys
import time

import torch

LAYERS, WIDTH, BATCH = 8, 256, 64
EMBEDDING_ROWS, EMBEDDING_BATCH = 8192, 4096


def timed(body, seconds, before=None):
    """Mean seconds per call of body() over `seconds`; before() runs untimed ahead of each call."""
    def run(limit):
        spent, n = 0.0, 0
        while spent < limit or n < 3:
            if before is not None:
                before()
            t0 = time.perf_counter()
            body()
            spent += time.perf_counter() - t0
            n += 1
        return spent, n
    run(seconds / 10)
    spent, n = run(seconds)
    return spent / n, n


def emit(key, result):
    print(json.dumps({"key": key, "seconds_per_iter": result[0], "iterations": result[1]}), flush=True)


def mlp_weights(dtype):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(BATCH, WIDTH, generator=g, dtype=torch.float64).to(dtype)
    ws = [(torch.randn(WIDTH, WIDTH, generator=g, dtype=torch.float64) / 16).to(dtype).requires_grad_()
          for _ in range(LAYERS)]
    return x, ws


def local(seconds):
    for dtype, key in ((torch.float32, "BM_MlpLocal/float32:1"), (torch.float64, "BM_MlpLocal/float32:0")):
        x, ws = mlp_weights(dtype)

        def step():
            h = x
            for w in ws:
                h = torch.tanh(h @ w)
            torch.autograd.grad(h.sum(), ws)
        emit(key, timed(step, seconds))
    g = torch.Generator().manual_seed(1)
    a = torch.randn(256, 256, generator=g, dtype=torch.float32)
    b = torch.randn(256, 256, generator=g, dtype=torch.float32)
    emit("BM_GemmOurs/n:256", timed(lambda: torch.mm(a, b), seconds))
    # The engine's cost per node: backward through 10,000 chained adds (the graph is built untimed).
    x = torch.ones(1, requires_grad=True)
    graph = {}

    def build():
        y = x
        for _ in range(10000):
            y = y + 1.0
        graph["loss"] = y.sum()
    emit("BM_EngineChain/ops:10000", timed(lambda: torch.autograd.grad(graph["loss"], [x]), seconds, build))
    # An embedding lookup and the table's dense gradient (bm_tensor.cc's sizes; other positions,
    # drawn the same way: uniform over the rows, repeats included).
    weight = torch.randn(EMBEDDING_ROWS, 256, generator=g, dtype=torch.float32).requires_grad_()
    positions = torch.randint(0, EMBEDDING_ROWS, (EMBEDDING_BATCH,), generator=g)
    grad_out = torch.ones(EMBEDDING_BATCH, 256, dtype=torch.float32)
    emit("BM_EmbeddingOurs/width:256",
         timed(lambda: torch.autograd.grad(torch.nn.functional.embedding(positions, weight), [weight], grad_out),
               seconds))
    # cross_entropy over 8192 classes, batch 64, and the logits' gradient (bm_tensor.cc's sizes).
    logits = torch.randn(64, 8192, generator=g, dtype=torch.float32).requires_grad_()
    targets = torch.randint(0, 8192, (64,), generator=g)
    emit("BM_CrossEntropyOurs/classes:8192",
         timed(lambda: torch.autograd.grad(torch.nn.functional.cross_entropy(logits, targets), [logits]), seconds))
    # layer_norm over the last dim of [512, 1024] with a weight and a bias, and all three gradients.
    x = torch.randn(512, 1024, generator=g, dtype=torch.float32).requires_grad_()
    weight = (1 + 0.1 * torch.randn(1024, generator=g, dtype=torch.float32)).requires_grad_()
    bias = (0.1 * torch.randn(1024, generator=g, dtype=torch.float32)).requires_grad_()
    grad_y = torch.randn(512, 1024, generator=g, dtype=torch.float32)
    emit("BM_LayerNormOurs/width:1024",
         timed(lambda: torch.autograd.grad(torch.nn.functional.layer_norm(x, (1024,), weight, bias, 1e-5),
                                           [x, weight, bias], grad_y), seconds))
    # max over the last dim of [64, 8192] and the input's gradient through the values' sum.
    x = torch.randn(64, 8192, generator=g, dtype=torch.float32).requires_grad_()
    emit("BM_MaxOverDimOurs/width:8192",
         timed(lambda: torch.autograd.grad(torch.max(x, dim=1).values.sum(), [x]), seconds))


MLP_WIDTHS = (64, 128, 256, 512, 1024, 2048)


def mlp_width(seconds):
    """BM_MlpWidth's counterpart (group mlp_width): the local float32 MLP step (8 layers, batch 64,
    tanh) at each width of MLP_WIDTHS, keys BM_MlpWidth/width:W; weights N(0,1)/sqrt(width), drawn as
    mlp_weights draws them (1/16 at 256: BM_MlpLocal's model)."""
    for width in MLP_WIDTHS:
        g = torch.Generator().manual_seed(11)
        x = torch.randn(BATCH, width, generator=g, dtype=torch.float64).to(torch.float32)
        ws = [(torch.randn(width, width, generator=g, dtype=torch.float64) / width ** 0.5).to(torch.float32)
              .requires_grad_() for _ in range(LAYERS)]

        def step():
            h = x
            for w in ws:
                h = torch.tanh(h @ w)
            torch.autograd.grad(h.sum(), ws)
        emit("BM_MlpWidth/width:%d" % width, timed(step, seconds))


# tcp: worker1's functions, pickled by reference. ---------------------------------------------------
_MODELS = {}


def echo(t):
    return t


def owned_layer(h, i):
    return h @ _MODELS[h.dtype][1][i]


def _worker(rank, port, seconds, sizes):
    import torch.distributed.autograd as dist_autograd
    import torch.distributed.rpc as rpc
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    for dtype in (torch.float32, torch.float64):
        _MODELS[dtype] = mlp_weights(dtype)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    if rank == 0:
        for size in sizes:
            t = torch.full((max(size // 8, 1),), 0.5, dtype=torch.float64)
            emit(f"BM_TcpRpc/{size}/0", timed(lambda: rpc.rpc_sync("worker1", echo, args=(t,)), seconds))
        g = torch.Generator().manual_seed(7)
        t1, t2, t4 = (torch.rand(3, 3, generator=g, dtype=torch.float64).requires_grad_() for _ in range(3))

        def seed_step():
            with dist_autograd.context() as cid:
                t3 = rpc.rpc_sync("worker1", torch.add, args=(t1, t2))
                dist_autograd.backward(cid, [(t3 * t4).sum()])
                assert len(dist_autograd.get_gradients(cid)) == 3
        emit("BM_TcpSeedStep/0", timed(seed_step, seconds))
        for dtype, key in ((torch.float32, "BM_TcpMlpStep/0/float32:1"), (torch.float64, "BM_TcpMlpStep/0/float32:0")):
            x, ws = _MODELS[dtype]

            def mlp_step():
                with dist_autograd.context() as cid:
                    h = x
                    for i in range(LAYERS):
                        z = rpc.rpc_sync("worker1", owned_layer, args=(h, i)) if i % 2 == 1 else h @ ws[i]
                        h = torch.tanh(z)
                    dist_autograd.backward(cid, [h.sum()])
            emit(key, timed(mlp_step, seconds))
    rpc.shutdown()


def tcp(seconds, sizes=(64, 1 << 20)):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        try:
            _worker(1, port, seconds, sizes)
        finally:
            os._exit(0)
    _worker(0, port, seconds, sizes)
    os.waitpid(pid, 0)


def main(argv):
    # mlp_width SECONDS: BM_MlpWidth's growth sweep (kept out of local: width 2048 takes a while).
    if len(argv) == 3 and argv[1] == "mlp_width":
        torch.set_num_threads(1)
        mlp_width(float(argv[2]))
        return
    usage = "usage: pytorch_counterparts.py local|tcp SECONDS [--sizes B,B,...]"
    if len(argv) not in (3, 5) or argv[1] not in ("local", "tcp"):
        sys.exit(usage)
    torch.set_num_threads(1)
    seconds = float(argv[2])
    if len(argv) == 5:
        if argv[1] != "tcp" or argv[3] != "--sizes":
            sys.exit(usage)
        tcp(seconds, tuple(int(b) for b in argv[4].split(",")))
    else:
        {"local": local, "tcp": tcp}[argv[1]](seconds)


if __name__ == "__main__":
    main(sys.argv)
