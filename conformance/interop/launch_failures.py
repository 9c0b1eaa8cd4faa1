"""torchrun 1.13 and `dagsim launch` side by side when a job goes wrong (issue 50 items 2 and 3).

Each case runs the same job under both launchers with the same flags (--redirects 1 --tee 1
included: Debian's torchrun 1.13 on Python 3.11 cannot parse the defaults), and prints what each
did in a side-by-side table:

  store-host  Two agents, c10d on a port of this host, the first hosting the store (is_host=true).
              Once both agents' workers run, SIGTERM to the host agent; the seconds until the other
              agent exits are recorded for both. Asserted of dagsim: the survivor exits 1 within
              30 s naming the agent that hosted the store and why the job cannot go on. torchrun's
              time is recorded, not asserted (its survivor fails in about 2 s on the next store
              call; before issue 50 dagsim's waited out the store's timeout, 64 to 125 s).
  record      One agent, two workers; rank 1's @record main raises ValueError. Asserted of dagsim:
              its "Root Cause (first observed failure)" block names rank 1 and local_rank 1, this
              host, the worker's pid, exitcode 1, the time, the error file (which exists) and the
              traceback's last line, as torchrun's does (torchrun's block is checked the same way,
              so a difference in torchrun shows here too).

Usage: launch_failures.py DAGSIM [store-host|record ...]   (with /usr/bin/python3, which has torch)
Exit 0 when every assertion held, 1 naming each that did not, 77 when torch is missing.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

SLEEPER = r'''
import os, sys, time
open(os.path.join(sys.argv[1], "started_%s_%s" % (sys.argv[2], os.environ["RANK"])), "w").close()
time.sleep(600)
'''

RECORDED = r'''
import os, time
from torch.distributed.elastic.multiprocessing.errors import record

def load(batch):
    raise ValueError("bad batch %d on rank %s" % (batch, os.environ["RANK"]))

@record
def main():
    if os.environ["RANK"] == "1":
        load(7)
    time.sleep(60)

if __name__ == "__main__":
    main()
'''

TORCHRUN = ["/usr/bin/python3", "-m", "torch.distributed.run"]
COMMON = ["--redirects", "1", "--tee", "1", "--monitor_interval", "1"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment():
    return dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))


def wait_for(condition, seconds):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def store_host(launcher, name, tmp):
    """Seconds from the host agent's exit to the survivor's, the survivor's exit code and output."""
    out = os.path.join(tmp, name)
    os.makedirs(out)
    script = os.path.join(tmp, "sleeper.py")
    port = free_port()
    flags = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
             "127.0.0.1:%d" % port, "--rdzv_id", "hostjob", "--max_restarts", "3"] + COMMON
    agents = []
    for i, is_host in enumerate(("true", "false")):
        log = open(os.path.join(tmp, "%s_agent%d.log" % (name, i)), "wb")
        argv = launcher + flags + ["--rdzv_conf", "is_host=" + is_host, script, out, str(i)]
        agents.append((subprocess.Popen(argv, env=environment(), stdout=log, stderr=subprocess.STDOUT), log))
    host, survivor = agents[0][0], agents[1][0]
    started = wait_for(lambda: len(os.listdir(out)) == 2, 240)
    if not started:
        for p, _ in agents:
            p.kill()
        return None, None, "the workers did not start"
    time.sleep(2)  # both agents in their monitor loop
    host.send_signal(signal.SIGTERM)
    host.wait(timeout=300)
    gone = time.monotonic()
    try:
        survivor.wait(timeout=400)
        seconds = time.monotonic() - gone
    except subprocess.TimeoutExpired:
        survivor.kill()
        survivor.wait()
        seconds = None
    for _, log in agents:
        log.close()
    with open(os.path.join(tmp, "%s_agent1.log" % name), errors="replace") as f:
        text = f.read()
    return seconds, survivor.returncode, text


FIELDS = {
    "rank": r"^\s*rank\s*: 1 \(local_rank: 1\)$",
    "host": r"^\s*host\s*: \S+$",
    "exitcode and pid": r"^\s*exitcode\s*: 1 \(pid: \d+\)$",
    "time": r"^\s*time\s*: \d{4}-\d\d-\d\d_\d\d:\d\d:\d\d$",
    "error_file": r"^\s*error_file: (/\S+/attempt_0/1/error\.json)$",
    "traceback's last line": r"^\s*ValueError: bad batch 7 on rank 1$",
}


def root_cause(text):
    """The Root Cause block's lines, and which fields it has."""
    at = text.find("Root Cause (first observed failure):")
    if at < 0:
        return "", {}
    block = text[at:].split("\n")
    end = next((i for i, line in enumerate(block[1:], 1) if line.startswith("=====")), len(block))
    block = "\n".join(block[:end + 1])
    found = {}
    for field, pattern in FIELDS.items():
        m = re.search(pattern, block, re.M)
        if m:
            found[field] = m.group(1) if m.groups() else m.group(0).strip()
    return block, found


def record(launcher, name, tmp):
    script = os.path.join(tmp, "recorded.py")
    argv = launcher + ["--nnodes", "1", "--nproc_per_node", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                       "127.0.0.1:%d" % free_port(), "--rdzv_id", "recjob", "--max_restarts", "0",
                       "--log_dir", os.path.join(tmp, name + "_logs")] + COMMON + [script]
    p = subprocess.run(argv, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    text = p.stdout.decode(errors="replace")
    block, found = root_cause(text)
    return p.returncode, block, found


def main():
    dagsim = sys.argv[1]
    cases = sys.argv[2:] or ["store-host", "record"]
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        print("SKIP: /usr/bin/python3 cannot import torch.distributed (install python3-torch: scripts/deps.sh test)")
        return 77
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "sleeper.py"), "w") as f:
            f.write(SLEEPER)
        with open(os.path.join(tmp, "recorded.py"), "w") as f:
            f.write(RECORDED)
        if "store-host" in cases:
            theirs = store_host(TORCHRUN, "torchrun", tmp)
            ours = store_host([dagsim, "launch"], "dagsim", tmp)
            print("SIGTERM to the agent hosting the c10d store (2 agents, --monitor_interval 1):")
            print("  %-10s %-28s %s" % ("", "survivor's time to exit", "exit"))
            for label, (seconds, code, _) in (("torchrun", theirs), ("dagsim", ours)):
                shown = "%.2f s" % seconds if seconds is not None else "did not exit in 400 s"
                print("  %-10s %-28s %s" % (label, shown, code))
            seconds, code, text = ours
            if seconds is None or seconds > 30:
                problems.append("dagsim's survivor took %s s (bound 30 s):\n%s" % (seconds, text))
            if code != 1:
                problems.append("dagsim's survivor exited %s, not 1:\n%s" % (code, text))
            if not re.search(r"the store host left: agent \S+, which hosted the c10d store at 127\.0\.0\.1:\d+, is gone", text or ""):
                problems.append("dagsim's survivor did not name the agent that hosted the store:\n%s" % text)
            if "this job cannot go on" not in (text or ""):
                problems.append("dagsim's survivor did not say why the job cannot go on:\n%s" % text)
            print("  dagsim's survivor said:")
            for line in (text or "").splitlines():
                if "store host left" in line or "failed after" in line:
                    print("    " + line)
        if "record" in cases:
            results = {"torchrun": record(TORCHRUN, "torchrun", tmp), "dagsim": record([dagsim, "launch"], "dagsim", tmp)}
            print("\nA failing @record worker (rank 1 raises ValueError), the Root Cause block of each:")
            for label, (code, block, found) in results.items():
                print("--- %s (exit %d)\n%s" % (label, code, block))
            print("\n  %-24s %-10s %s" % ("field", "torchrun", "dagsim"))
            for field in FIELDS:
                print("  %-24s %-10s %s" % (field, "yes" if field in results["torchrun"][2] else "NO",
                                             "yes" if field in results["dagsim"][2] else "NO"))
            code, block, found = results["dagsim"]
            if code != 1:
                problems.append("dagsim launch exited %d, not 1" % code)
            for field in FIELDS:
                if field not in found:
                    problems.append("dagsim's root cause has no %s:\n%s" % (field, block))
            if "error_file" in found and not os.path.isfile(found["error_file"]):
                problems.append("dagsim's error_file %s does not exist" % found["error_file"])
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
