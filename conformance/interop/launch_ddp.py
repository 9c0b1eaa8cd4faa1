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
import os
import signal
import subprocess
import sys
import tempfile
import time

from ddp_harness import DDP_JOB, check_against_reference, free_port, show_logs, wait_for_step

STEPS = 40


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
                 DDP_JOB, out, str(STEPS), "0.3"]
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
        check_against_reference(out, STEPS)
        if 6 not in worlds or 8 not in worlds:
            sys.exit("FAIL: the job never ran with both 6 and 8 workers: %s" % worlds)
        print("PASS")


if __name__ == "__main__":
    main()
