"""An elastic PyTorch job under `dagsim launch`, through failures (issue 24, "Done when" 1).

Four agents x two workers on this host train ddp_job.py (gloo, DistributedDataParallel, a
checkpoint every step) with --nnodes 3:5 on a c10d rendezvous one agent serves. Meanwhile:
  1. once step 5 is checkpointed, one worker process is killed with SIGKILL: its agent restarts
     the group (counted), and every agent re-forms;
  2. once step 14 is checkpointed, one agent (not the store's host) is killed with SIGKILL: its
     workers die with it, the others find it gone after the keep-alive expiry and re-form with 3;
  3. once step 22 is checkpointed, a fifth agent joins late: the others restart for it (not
     counted) and the job goes on with 4 again.
Every surviving agent must exit 0, and the final parameters must equal an uninterrupted run's
(ddp_job.py --reference, one process, the same global batches) within float32 tolerance.

Usage: launch_ddp.py DAGSIM   (with /usr/bin/python3, which has torch). Exit 0 on success.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

STEPS = 40
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checkpointed(out):
    import torch
    try:
        return torch.load(os.path.join(out, "ckpt.pt"))["step"]
    except Exception:
        return -1


def show_logs(out):
    """The agents' logs and every worker's, for a failure's message."""
    for root, _, files in os.walk(out):
        for name in sorted(files):
            if name.endswith(".log"):
                with open(os.path.join(root, name), errors="replace") as f:
                    lines = [l for l in f.readlines() if "rank" not in l or "done" not in l][-12:]
                print("--- %s:\n%s" % (os.path.relpath(os.path.join(root, name), out), "".join(lines)))
    with open(os.path.join(out, "pids")) as f:
        print("--- worker starts (pid rank world restart_count):\n" + f.read())


def wait_for_step(out, step, agents, deadline):
    while checkpointed(out) < step:
        if time.time() > deadline or all(a.poll() is not None for a in agents):
            show_logs(out)
            sys.exit("FAIL: step %d was never checkpointed (%s)" % (step, [a.poll() for a in agents]))
        time.sleep(0.1)


def main():
    dagsim = sys.argv[1]
    with tempfile.TemporaryDirectory() as out:
        port = free_port()
        env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))
        flags = ["--nnodes", "3:5", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", "127.0.0.1:%d" % port, "--rdzv_id", "ddpjob", "--max_restarts", "3",
                 "--monitor_interval", "0.5", "--stop-grace", "5",
                 "--rdzv_conf", "last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=3,join_timeout=120",
                 "--log_dir", os.path.join(out, "logs"),
                 os.path.join(HERE, "ddp_job.py"), out, str(STEPS), "0.3"]
        logs = []

        def agent(name):
            log = open(os.path.join(out, name + ".log"), "w")
            logs.append((name, log.name))
            return subprocess.Popen([dagsim, "launch", "--events", os.path.join(out, name + ".events")] + flags,
                                    env=env, stdout=log, stderr=subprocess.STDOUT)

        deadline = time.time() + 400
        # agent0 serves the store: the others start once it does.
        agents = [agent("agent0")]
        while "serving the rendezvous store" not in open(os.path.join(out, "agent0.log")).read():
            if agents[0].poll() is not None or time.time() > deadline:
                show_logs(out)
                sys.exit("FAIL: agent0 did not serve the store")
            time.sleep(0.05)
        agents += [agent("agent%d" % i) for i in range(1, 4)]
        try:
            wait_for_step(out, 5, agents, deadline)
            with open(os.path.join(out, "pids")) as f:
                victim = int(f.read().split()[0])
            os.kill(victim, signal.SIGKILL)
            print("killed worker %d after step 5" % victim)
            wait_for_step(out, 14, agents, deadline)
            agents[3].kill()  # agent0 serves the store; agent3 does not
            agents[3].wait()
            print("killed agent3 after step 14")
            wait_for_step(out, 22, agents, deadline)
            agents.append(agent("agent4"))
            print("agent4 joined after step 22")
            survivors = agents[:3] + agents[4:]
            for a in survivors:
                a.wait(timeout=max(1, deadline - time.time()))
            codes = [a.returncode for a in survivors]
        except subprocess.TimeoutExpired:
            show_logs(out)
            sys.exit("FAIL: the agents had not ended by the deadline")
        finally:
            for a in agents:
                if a.poll() is None:
                    a.kill()
        for name, path in logs:
            with open(path) as f:
                tail = f.read().splitlines()[-3:]
            print("--- %s: %s" % (name, " | ".join(tail)))
        if codes != [0] * len(codes):
            sys.exit("FAIL: the surviving agents exited %s" % codes)
        with open(os.path.join(out, "pids")) as f:
            worlds = sorted({int(line.split()[2]) for line in f})
        print("world sizes seen:", worlds)
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "ddp_job.py"), "--reference", out, str(STEPS)], check=True)
        with open(os.path.join(out, "final.json")) as f:
            final = json.load(f)
        with open(os.path.join(out, "reference.json")) as f:
            ref = json.load(f)
        worst = max(abs(a - b) / max(1.0, abs(b)) for fa, fb in zip(final, ref) for a, b in zip(fa, fb))
        print("largest relative difference from the uninterrupted run: %.3g" % worst)
        if worst > 1e-4:
            sys.exit("FAIL: the parameters differ from the uninterrupted run's")
        if 6 not in worlds or 8 not in worlds:
            sys.exit("FAIL: the job never ran with both 6 and 8 workers: %s" % worlds)
        print("PASS")


if __name__ == "__main__":
    main()
