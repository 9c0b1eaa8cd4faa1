"""torch RPC between roles under `dagsim launch` (local_elastic_agent_test.py's torch_rpc, issue 24).

Two agents on this host, one with --role master and one with --role worker, one worker process
each, form a c10d rendezvous; each worker starts torch.distributed.rpc from the environment the
agent gave it (init_rpc(name=ROLE_NAME, rank=RANK, world_size=WORLD_SIZE), env:// through
MASTER_ADDR and MASTER_PORT), and the master calls the worker by its role's name. Exit 0 when the
master got "hello world from worker" and both agents exited 0.

Usage: launch_rpc.py DAGSIM   (with /usr/bin/python3, which has torch)
       launch_rpc.py --worker OUT   (what each worker process runs)
"""
import os
import socket
import subprocess
import sys
import tempfile


def echo(text):
    return text + " from worker"


def worker(out):
    import torch.distributed.rpc as rpc
    role, rank, world = os.environ["ROLE_NAME"], int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rpc.init_rpc(name=role, rank=rank, world_size=world)
    if role == "master":
        reply = rpc.rpc_sync("worker", echo, args=("hello world",))
        with open(os.path.join(out, "reply"), "w") as f:
            f.write(reply)
    rpc.shutdown()


def main(dagsim):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The workers' python3 is Debian's, which has torch.
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))
    with tempfile.TemporaryDirectory() as out:
        def agent(role, is_host):
            return subprocess.Popen(
                [dagsim, "launch", "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", "127.0.0.1:%d" % port, "--rdzv_id", "rpcjob", "--role", role,
                 "--rdzv_conf", "is_host=%s,join_timeout=120" % is_host, "--monitor_interval", "0.5",
                 "--tee", "3", os.path.abspath(__file__), "--worker", out],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        agents = [agent("master", "true"), agent("worker", "false")]
        outputs = []
        for a in agents:
            try:
                outputs.append(a.communicate(timeout=240)[0])
            except subprocess.TimeoutExpired:
                for b in agents:
                    b.kill()
                sys.exit("FAIL: the agents had not ended in 240 s")
        codes = [a.returncode for a in agents]
        reply_file = os.path.join(out, "reply")
        reply = open(reply_file).read() if os.path.exists(reply_file) else None
        if codes != [0, 0] or reply != "hello world from worker":
            for o in outputs:
                print(o[-3000:])
            sys.exit("FAIL: exit codes %s, the master's reply %r" % (codes, reply))
    print("PASS: the master's rpc_sync to \"worker\" returned %r" % reply)


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        if subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed.rpc"], capture_output=True).returncode:
            print("SKIP: /usr/bin/python3 has no torch.distributed.rpc")
            sys.exit(77)
        main(sys.argv[1])
