#!/usr/bin/env python3
"""`dagsim launch` under a real Slurm (issue 48 item 6): two agents started by `srun -n2` form one
job from Slurm's environment alone, and it finishes.

Goal: what a torchrun user writes in an sbatch script works without the flags they would copy from
Slurm by hand. Method: a one-host Slurm cluster from Debian's slurm-wlm, run in this test's own
folder (shared/reference/slurm-single-host.md): munged, `slurmctld -D` and `slurmd -D` as root.
Then

    srun -n2 dagsim launch --nproc_per_node 1 --no_python worker.sh

with no --nnodes, --rdzv_id, --rdzv_endpoint nor --rdzv_backend: each agent must take 2 agents from
the step's tasks, the job id as the run id, this host (the step's first node) as the c10d endpoint,
and c10d. Checked: srun exits 0; each agent's log says which values came from Slurm; both agents
start their group in the same round, as group ranks 0 and 1 of 2, and succeed; exactly one agent
serves the store; the two workers saw ranks 0 and 1 of a world of 2 with the job id as
TORCHELASTIC_RUN_ID.

Everything this test starts it stops by pid, munged and Slurm's step daemons included: the test
makes itself a child subreaper, so the daemons that detach (munged, slurmstepd) stay its
descendants and are found, stopped and reaped at the end, on failure too; then its folder goes.
Every wait is on a condition with a generous deadline, so it passes on a loaded machine.

With --cli it checks the command line's side alone, with Slurm's variables set by hand (no Slurm
needed): flags and PET_ variables win over Slurm's values, and a malformed node list stops the
launch with exit 2, naming the variable.

Exit status: 0 passed, 1 failed, 77 skipped (not root, or slurm-wlm/munge not installed).
Usage: srun_launch.py [--cli] DAGSIM_BINARY
"""
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
PR_SET_CHILD_SUBREAPER = 36
STORE_PORT = 29400  # c10d's default: the endpoint from Slurm carries no port
T0 = time.monotonic()


def log(message):
    print(f"[{time.monotonic() - T0:6.1f}s] {message}", flush=True)


class Failed(Exception):
    pass


def wait_for(what, condition, deadline_s, poll_s=0.2):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(poll_s)
    raise Failed(f"{what}: not within {deadline_s} s")


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the store server binds
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def descendants():
    """Every live process below this one, by pid (read from /proc, not by name)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"({e})\n"


class Cluster:
    """A one-host Slurm in `root`: munged, slurmctld, slurmd; stop() ends them and what they ran."""

    def __init__(self, root):
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PET_"))}
        self.env["SLURM_CONF"] = os.path.join(root, "slurm.conf")
        self.daemons = []  # Popen of slurmctld and slurmd
        self.munged_pid = None

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def start(self):
        for d in ("state", "spool", "munge"):
            os.makedirs(self.path(d))
        os.chmod(self.path("munge"), 0o700)
        with open(self.path("munge", "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.path("munge", "munge.key"), 0o400)
        munge = self.path("munge")
        # munged detaches; -f lets it run as root with its key in a place of our own.
        subprocess.run(["munged", f"--key-file={munge}/munge.key", f"--socket={munge}/munge.sock",
                        f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
                        f"--seed-file={munge}/seed", "-f"], check=True, timeout=60, env=self.env)
        wait_for("munged's pid file", lambda: os.path.exists(f"{munge}/munged.pid"), 60)
        with open(f"{munge}/munged.pid") as f:
            self.munged_pid = int(f.read().strip())
        wait_for("munged's socket", lambda: os.path.exists(f"{munge}/munge.sock"), 60)

        host = socket.gethostname().split(".")[0]
        ctld_port, slurmd_port = free_ports(2)
        with open(self.env["SLURM_CONF"], "w") as f:
            f.write(f"""ClusterName=dagsim
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge}/munge.sock
CredType=cred/munge
StateSaveLocation={self.path("state")}
SlurmdSpoolDir={self.path("spool")}
SlurmctldPidFile={self.path("slurmctld.pid")}
SlurmdPidFile={self.path("slurmd.pid")}
SlurmctldLogFile={self.path("slurmctld.log")}
SlurmdLogFile={self.path("slurmd.log")}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
ReturnToService=2
MpiDefault=none
NodeName={host} CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
        for daemon in ("slurmctld", "slurmd"):
            out = open(self.path(f"{daemon}.out"), "w")
            self.daemons.append(subprocess.Popen([daemon, "-D", "-f", self.env["SLURM_CONF"]], stdout=out,
                                                 stderr=subprocess.STDOUT, env=self.env))

        def idle():
            for d in self.daemons:
                if d.poll() is not None:
                    raise Failed(f"{d.args[0]} exited with {d.returncode}")
            r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=self.env, timeout=60)
            return r.returncode == 0 and "idle" in r.stdout

        wait_for("the node idle in sinfo", idle, 180, poll_s=0.5)
        return host

    def stop(self):
        # Jobs first, through Slurm, so slurmstepd ends its tasks; then the daemons; then anything
        # still below this process (a step daemon, a worker) by pid.
        if self.daemons and all(d.poll() is None for d in self.daemons):
            subprocess.run(["scancel", "--user=root"], env=self.env, timeout=60, capture_output=True)

            def empty():
                r = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=self.env, timeout=60)
                return r.returncode == 0 and not r.stdout.strip()

            try:
                wait_for("no jobs left in squeue", empty, 60, poll_s=0.5)
            except (Failed, subprocess.SubprocessError) as e:
                log(f"cleanup: {e}")
        for d in reversed(self.daemons):
            if d.poll() is None:
                d.send_signal(signal.SIGTERM)
        for d in reversed(self.daemons):
            try:
                d.wait(timeout=30)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()
        if self.munged_pid is not None:
            try:
                os.kill(self.munged_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def report_failure(cluster, error):
    """Prints why a test failed and the last lines of the cluster's daemons' logs."""
    print(f"FAIL: {error}", flush=True)
    for name in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munge/munged.log"):
        print(f"--- {name} (last lines) ---\n{tail(cluster.path(name))}", end="", flush=True)


def tear_down(cluster, root):
    """Stops the cluster and every process the test started, and removes its folder. False (with
    the processes named) when any was still running after that."""
    cluster.stop()
    left = stop_descendants()
    shutil.rmtree(root, ignore_errors=True)
    if left:
        print(f"FAIL: processes left running after cleanup: {left}", flush=True)
    log(f"stopped everything this test started; {root} removed")
    return not left


def stop_descendants():
    """SIGTERM, a grace, SIGKILL to every process below this one; reaps them. Returns the leftovers."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        for pid in descendants():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace
        while time.monotonic() < end:
            reap()
            if not descendants():
                return []
            time.sleep(0.1)
    reap()
    return descendants()


WORKER = """#!/bin/sh
# A worker of the job: writes what its agent handed it, for the driver to check, and succeeds.
out="$DAGSIM_SLURM_OUT/rank$RANK"
env | grep -E '^(RANK|WORLD_SIZE|LOCAL_RANK|GROUP_RANK|GROUP_WORLD_SIZE|TORCHELASTIC_RUN_ID|TORCHELASTIC_RESTART_COUNT|MASTER_ADDR|MASTER_PORT|SLURM_JOB_ID)=' | sort > "$out.tmp"
mv "$out.tmp" "$out"
"""


def run_job(cluster, host, dagsim):
    out = cluster.path("out")
    os.makedirs(out)
    os.makedirs(cluster.path("tmp"))
    worker = cluster.path("worker.sh")
    with open(worker, "w") as f:
        f.write(WORKER)
    os.chmod(worker, 0o755)
    # c10d's default port, which the endpoint from Slurm implies: wait for another user of it to go.
    wait_for(f"port {STORE_PORT} free (the c10d store's default)", lambda: port_free(STORE_PORT), 120, poll_s=1)

    env = dict(cluster.env, DAGSIM_SLURM_OUT=out, TMPDIR=cluster.path("tmp"))
    command = ["srun", "-n2", "--time=5", f"--chdir={cluster.root}",
               f"--output={cluster.path('agent-%t.out')}", f"--error={cluster.path('agent-%t.err')}",
               dagsim, "launch", "--nproc_per_node", "1", "--no_python", "--monitor_interval", "0.5", worker]
    log("running " + " ".join(command))
    srun = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Who holds the store's port while the job runs, each change once: when both agents fail to
    # serve it (seen once, issue 50's note), this says which process had it.
    holders, watching = [], threading.Event()

    def watch_port():
        last = None
        while not watching.wait(0.2):
            seen = subprocess.run(["ss", "-Htanp", f"( sport = :{STORE_PORT} )"], capture_output=True, text=True).stdout
            if seen != last:
                holders.append(f"[{time.monotonic() - T0:6.1f}s]\n{seen or '(nothing)'}")
                last = seen

    watcher = threading.Thread(target=watch_port, daemon=True)
    if shutil.which("ss"):
        watcher.start()
    try:
        output, _ = srun.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        srun.kill()
        output, _ = srun.communicate()
        raise Failed(f"srun did not end within 300 s:\n{output}\nport {STORE_PORT}'s holders:\n" + "".join(holders))
    finally:
        watching.set()
    log(f"srun exited with {srun.returncode}")
    agents = []
    for task in (0, 1):
        with open(cluster.path(f"agent-{task}.err"), errors="replace") as f:
            agents.append(f.read())
    for task, text in enumerate(agents):
        print(f"--- agent {task}'s log ---\n{text}", end="", flush=True)
    if srun.returncode != 0:
        raise Failed(f"srun exited with {srun.returncode}:\n{output}\nport {STORE_PORT}'s holders:\n" + "".join(holders))

    workers = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as f:
            workers[name] = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    check(agents, workers, host)


def check(agents, workers, host):
    problems = []

    def expect(ok, what):
        if not ok:
            problems.append(what)

    job_ids = set()
    rounds, ranks = set(), set()
    for task, text in enumerate(agents):
        job = re.search(r"from Slurm: --rdzv_id (\d+) \(SLURM_JOB_ID\)", text)
        expect(job, f"agent {task}: no --rdzv_id from SLURM_JOB_ID")
        if job:
            job_ids.add(job.group(1))
        expect("from Slurm: --nnodes 2 (SLURM_STEP_NUM_TASKS: one agent per task of this srun step)" in text,
               f"agent {task}: no --nnodes 2 from SLURM_STEP_NUM_TASKS")
        expect(f"from Slurm: --rdzv_endpoint {host} (the first of 1 node(s) in SLURM_STEP_NODELIST" in text,
               f"agent {task}: no --rdzv_endpoint {host} from SLURM_STEP_NODELIST")
        expect("from Slurm: --rdzv_backend c10d" in text, f"agent {task}: no --rdzv_backend c10d from Slurm")
        started = re.findall(r"round (\d+): group_started as group rank (\d+) of (\d+)", text)
        expect(len(started) == 1, f"agent {task}: {len(started)} group starts, expected 1")
        for round_, rank, world in started:
            rounds.add(round_)
            ranks.add(rank)
            expect(world == "2", f"agent {task}: a group of {world} agents")
        expect(re.search(r"dagsim launch: succeeded after \d+ round\(s\)", text), f"agent {task}: did not succeed")
    expect(len(job_ids) == 1, f"the agents' run ids: {sorted(job_ids)}")
    expect(len(rounds) == 1, f"the agents started their groups in rounds {sorted(rounds)}, not one")
    expect(ranks == {"0", "1"}, f"group ranks {sorted(ranks)}, expected 0 and 1")
    serving = sum(f"serving the rendezvous store on port {STORE_PORT}" in text for text in agents)
    expect(serving == 1, f"{serving} agents served the store, expected 1")

    expect(sorted(workers) == ["rank0", "rank1"], f"workers' files: {sorted(workers)}")
    job_id = next(iter(job_ids), None)
    for name, env in workers.items():
        expect(env.get("WORLD_SIZE") == "2" and env.get("GROUP_WORLD_SIZE") == "2", f"{name}: {env}")
        expect(env.get("TORCHELASTIC_RUN_ID") == job_id == env.get("SLURM_JOB_ID"),
               f"{name}: run id {env.get('TORCHELASTIC_RUN_ID')}, job {env.get('SLURM_JOB_ID')}, agents said {job_id}")
        expect(env.get("TORCHELASTIC_RESTART_COUNT") == "0", f"{name}: restarted")
    expect(len({(e.get("MASTER_ADDR"), e.get("MASTER_PORT")) for e in workers.values()}) == 1,
           "the workers were given different masters")
    expect({e.get("GROUP_RANK") for e in workers.values()} == {"0", "1"}, "the workers' group ranks are not 0 and 1")
    if problems:
        raise Failed("\n".join(problems))
    log(f"job {job_id}: 2 agents from Slurm's defaults, one round, ranks 0 and 1, both succeeded")


def cli_checks(dagsim):
    """The command line's side, with Slurm's variables set by hand (no Slurm, no root): a flag or a
    PET_ variable wins over Slurm's value, and a malformed variable stops the launch by name."""
    root = tempfile.mkdtemp(prefix="dagsim-slurm-cli-")
    problems = []
    try:
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": root, "SLURM_JOB_ID": "77",
                "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NODELIST": "nosuchhost[1-2]"}
        launch = [dagsim, "launch", "--rdzv_endpoint", "localhost:0", "--rdzv_conf", "is_host=true",
                  "--monitor_interval", "0.2", "--no_python", "/bin/true"]
        for how, extra_env, extra_flags in (("flags", {}, ["--nnodes", "1", "--rdzv_id", "mine"]),
                                            ("PET_ variables", {"PET_NNODES": "1", "PET_RDZV_ID": "mine"}, [])):
            r = subprocess.run(launch[:2] + extra_flags + launch[2:], env=dict(base, **extra_env), capture_output=True,
                               text=True, timeout=120)
            log(f"given as {how}: exit {r.returncode}\n{r.stderr}")
            if r.returncode != 0 or "run mine, 1 worker(s)" not in r.stderr:
                problems.append(f"given as {how}: exit {r.returncode}, or not run mine")
            for taken in ("--nnodes", "--rdzv_id", "--rdzv_endpoint"):
                if f"from Slurm: {taken} " in r.stderr:
                    problems.append(f"given as {how}: {taken} was taken from Slurm anyway")
            if "from Slurm: --rdzv_backend c10d" not in r.stderr:
                problems.append(f"given as {how}: the backend not given did not default to c10d")
        bad = dict(base, SLURM_STEP_NODELIST="node[01-")
        r = subprocess.run([dagsim, "launch", "--no_python", "/bin/true"], env=bad, capture_output=True, text=True, timeout=120)
        log(f"a malformed SLURM_STEP_NODELIST: exit {r.returncode}\n{r.stderr}")
        if r.returncode != 2 or 'SLURM_STEP_NODELIST "node[01-"' not in r.stderr or "dagsim launch: run " in r.stderr:
            problems.append("a malformed SLURM_STEP_NODELIST was not refused by name (exit 2) before the launch")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for p in problems:
        print(f"FAIL: {p}", flush=True)
    return 1 if problems else 0


def preflight(clients):
    """None when a one-host Slurm can run here (as root, with slurm-wlm and munge, and `clients`,
    the Slurm commands the test runs), this process now a child subreaper so the daemons that
    detach stay below it; else the exit status to end with: SKIP, or 1."""
    if os.geteuid() != 0:
        print("SKIP: needs root (slurmctld and slurmd run as root, as shared/reference/slurm-single-host.md does)")
        return SKIP
    needed = ("munged", "slurmctld", "slurmd", *clients, "sinfo", "squeue", "scancel")
    missing = [c for c in needed if not shutil.which(c)]
    if missing:
        print(f"SKIP: slurm-wlm and munge are not installed (no {', '.join(missing)}); scripts/deps.sh test installs them")
        return SKIP
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"FAIL: cannot become a child subreaper: {os.strerror(ctypes.get_errno())}")
        return 1
    return None


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--cli":
        return cli_checks(os.path.abspath(sys.argv[2]))
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    dagsim = os.path.abspath(sys.argv[1])
    refused = preflight(("srun",))
    if refused is not None:
        return refused

    root = tempfile.mkdtemp(prefix="dagsim-slurm-")
    cluster = Cluster(root)
    code = 0
    try:
        host = cluster.start()
        log(f"slurmctld and slurmd up on {host}, in {root}")
        run_job(cluster, host, dagsim)
    except (Failed, OSError, subprocess.SubprocessError) as e:
        report_failure(cluster, e)
        code = 1
    finally:
        if not tear_down(cluster, root):
            code = 1
    if code == 0:
        log("PASS")
    return code


if __name__ == "__main__":
    sys.exit(main())
