"""A worker's environment under `dagsim launch` against torchrun's, key by key (issue 24).

Runs the same job under both launchers with the same flags: --nnodes N --nproc_per_node 2, a c10d
rendezvous on a port of this host (one agent hosts the store), --redirects 1 --tee 1 (Debian's
torchrun 1.13 on Python 3.11 cannot parse the defaults). Each worker writes its whole environment
as JSON; the environments are compared by RANK. Differences allowed, and only these:
  - MASTER_PORT: a free port each launcher picked;
  - TORCHELASTIC_ERROR_FILE: <log dir>/<run id>_<random>/attempt_<n>/<local rank>/error.json, the
    random part differing (checked against that pattern).
Everything else, including every variable a worker inherits, must be equal. Exit 0 when equal,
1 naming each difference.

With BACKEND static (torchrun's default), the agents get --node_rank 0..N-1 and --master_addr
127.0.0.1 --master_port P instead of the c10d endpoint; each agent's environment also holds
LAUNCH_ENV_NODE_RANK, its node rank, and every worker's GROUP_RANK must equal it under both.

Usage: launch_env.py DAGSIM NNODES [c10d|static]   (with /usr/bin/python3, which has torch)
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

WORKER = r'''
import json, os, sys
with open(os.path.join(sys.argv[1], "env_%s.json" % os.environ["RANK"]), "w") as f:
    json.dump(dict(os.environ), f, sort_keys=True)
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(launcher, nnodes, tmp, name, backend):
    out = os.path.join(tmp, name)
    logs = os.path.join(tmp, name + "_logs")
    os.makedirs(out)
    script = os.path.join(tmp, "worker.py")
    port = free_port()
    rendezvous = ["--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:%d" % port]
    if backend == "static":
        rendezvous = ["--master_addr", "127.0.0.1", "--master_port", str(port)]
    flags = ["--nnodes", str(nnodes), "--nproc_per_node", "2"] + rendezvous + [
        "--rdzv_id", "envjob", "--max_restarts", "1", "--log_dir", logs, "--redirects", "1", "--tee", "1"]
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))
    agents = []
    for node_rank in range(nnodes):
        mine = flags + (["--node_rank", str(node_rank)] if backend == "static" else []) + [script, out]
        agent_env = dict(env, LAUNCH_ENV_NODE_RANK=str(node_rank))
        agents.append(subprocess.Popen(launcher + mine, env=agent_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for agent in agents:
        output, _ = agent.communicate(timeout=240)
        if agent.returncode != 0:
            sys.exit("%s failed (exit %d):\n%s" % (name, agent.returncode, output.decode(errors="replace")))
    envs = {}
    for f in os.listdir(out):
        with open(os.path.join(out, f)) as fh:
            e = json.load(fh)
        envs[e["RANK"]] = e
    return envs, logs


def main():
    dagsim, nnodes = sys.argv[1], int(sys.argv[2])
    backend = sys.argv[3] if len(sys.argv) > 3 else "c10d"
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "worker.py"), "w") as f:
            f.write(WORKER)
        ours, our_logs = run([dagsim, "launch"], nnodes, tmp, "dagsim", backend)
        theirs, their_logs = run(["/usr/bin/python3", "-m", "torch.distributed.run"], nnodes, tmp, "torchrun", backend)
        problems = []
        if backend == "static":
            for name, envs in (("dagsim", ours), ("torchrun", theirs)):
                for rank, e in sorted(envs.items()):
                    if e.get("GROUP_RANK") != e.get("LAUNCH_ENV_NODE_RANK"):
                        problems.append("%s rank %s: GROUP_RANK %r under the agent given --node_rank %r"
                                        % (name, rank, e.get("GROUP_RANK"), e.get("LAUNCH_ENV_NODE_RANK")))
        if sorted(ours) != sorted(theirs):
            problems.append("ranks: dagsim %s, torchrun %s" % (sorted(ours), sorted(theirs)))
        compared = 0
        for rank in sorted(set(ours) & set(theirs)):
            a, b = ours[rank], theirs[rank]
            for key in sorted(set(a) | set(b)):
                compared += 1
                if key == "MASTER_PORT":
                    if not (a.get(key, "").isdigit() and b.get(key, "").isdigit()):
                        problems.append("rank %s MASTER_PORT: %r vs %r" % (rank, a.get(key), b.get(key)))
                    continue
                if key == "TORCHELASTIC_ERROR_FILE":
                    for value, logs in ((a.get(key, ""), our_logs), (b.get(key, ""), their_logs)):
                        pattern = re.escape(logs) + r"/envjob_[^/]+/attempt_0/" + a["LOCAL_RANK"] + r"/error\.json"
                        if not re.fullmatch(pattern, value):
                            problems.append("rank %s TORCHELASTIC_ERROR_FILE %r is not %s" % (rank, value, pattern))
                    continue
                if a.get(key) != b.get(key):
                    problems.append("rank %s %s: dagsim %r, torchrun %r" % (rank, key, a.get(key), b.get(key)))
        print("launch_env: %s, %d agents x 2 workers, %d variables compared, %d differences"
              % (backend, nnodes, compared, len(problems)))
        for p in problems:
            print("  " + p)
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
