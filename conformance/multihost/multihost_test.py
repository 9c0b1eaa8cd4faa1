"""Many hosts on one machine (issue 48 item 5): three network namespaces stand for three hosts.

Each namespace gets one veth pair whose other end is on a bridge in the root namespace, and one
address in 10.248.N.0/24 (N chosen free on this machine; the bridge holds .254, the hosts .1 to
.3). Nothing is routed anywhere else. Each namespace's /etc/hosts (iproute2's /etc/netns/NAME/hosts,
which `ip netns exec` mounts) resolves this machine's name to 127.0.1.1 only, as Debian's default
does: the case where a node named by its host name would send every other host to its own loopback.

  launch DAGSIM   a c10d rendezvous store (`dagsim store --record`) on the bridge's address, one
                  `dagsim launch` agent per namespace training ddp_job.py (gloo DDP, unmodified,
                  one worker each; GLOO_SOCKET_IFNAME names the namespace's interface, as gloo
                  needs on any host whose name resolves to loopback). Checks:
                  1. every agent warns that the name resolves to loopback and names the address it
                     uses instead; its node descriptor and hostname (--events) are its namespace's
                     address; every write of the rendezvous state came from a namespace's address
                     and the states name the nodes by those addresses;
                  2. the third namespace's link is cut (`ip link set` down on the bridge side): the
                     other two expire it (a survivor writes the state without it) and re-form with
                     2 while its agent still runs, cut off; training goes on;
                  3. that agent is killed (the host is gone), the link comes back and a new agent
                     starts there: the job re-forms with 3;
                  4. the three agents exit 0 and the parameters equal an uninterrupted run's.
  static DAGSIM   torchrun's default backend across two of the namespaces, under torchrun 1.13 and
                  `dagsim launch` with the same flags (issue 50 item 1): `--nnodes 2 --node_rank
                  0|1 --master_addr <namespace 0's address> --master_port P --nproc_per_node 2`,
                  node rank 1 started first, training ddp_job.py. Both launchers' agents exit 0,
                  the workers are ranks 0-3 of 4, and the parameters equal an uninterrupted run's.
  tcp DAGSIM      docs/tcp.md's "Across hosts" procedure, its commands taken from the document
                  itself: the cluster id, the peers file (its addresses replaced by the
                  namespaces'), the CA and credential directories (made as written, each copied to
                  the "host" whose commands name it, and to no other), the
                  launcher and worker0 in the first namespace, worker1 in the second, each "host"
                  in a folder of its own holding copies of the scenario and the peers file. The
                  run must pass, and `dagsim judge run/` must agree.

Exit 0 on success, 1 naming what failed, 77 (skipped) when not root, without `ip netns`, or (launch)
without torch for /usr/bin/python3. Namespaces, links, hosts files and processes are removed at the
end, and those an aborted earlier run left (their names carry its pid) at the start.
"""
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "conformance", "interop"))
from ddp_harness import DDP_JOB, check_against_reference, checkpointed, show_logs, worker_starts  # noqa: E402

PREFIX = "dgs"  # every name this test makes: dgs<pid>n<i> (namespace), dgs<pid>h<i>/p<i> (veth), dgs<pid>br
HOSTS = 3
STEPS = 40
STEP_SECONDS = "0.4"
CUT = 2  # the namespace whose link is cut
# Generous: every wait below ends as soon as its condition holds; these bound only a broken run.
DEADLINE_S = 420


def fail(message, out=None):
    if out:
        show_logs(out)
    print("FAIL: " + message)
    sys.exit(1)


def run(*argv, check=True):
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), done.returncode, done.stderr.strip()))
    return done


def die_with_parent():
    """Popen's preexec_fn: SIGKILL when this script dies, so a killed test leaves no agent or store
    (ip netns exec execs the command in place, so the signal is the command's own)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def kill_namespace_processes(ns):
    """Every process in a namespace this test made is one it started, or a child of one."""
    for pid in run("ip", "netns", "pids", ns, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def clean_leftovers():
    """What an aborted run of this test left: names with a pid that is no longer running."""
    stale = lambda name: (lambda m: m is not None and not pid_alive(int(m.group(1))))(re.match(PREFIX + r"(\d+)", name))
    for line in run("ip", "netns", "list", check=False).stdout.splitlines():
        ns = line.split()[0] if line.split() else ""
        if re.fullmatch(PREFIX + r"\d+n\d+", ns) and stale(ns):
            kill_namespace_processes(ns)
            run("ip", "netns", "del", ns, check=False)
    for line in run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if re.fullmatch(PREFIX + r"\d+(br|h\d+)", name) and stale(name):
            run("ip", "link", "del", name, check=False)
    if os.path.isdir("/etc/netns"):
        for name in os.listdir("/etc/netns"):
            if re.fullmatch(PREFIX + r"\d+n\d+", name) and stale(name):
                shutil.rmtree(os.path.join("/etc/netns", name), ignore_errors=True)


def free_subnet():
    """A 10.248.N.0/24 no address or route on this machine uses yet."""
    used = run("ip", "-o", "addr", "show", check=False).stdout + run("ip", "route", "show", "table", "all", check=False).stdout
    for n in range(10, 250):
        if ("10.248.%d." % n) not in used:
            return n
    fail("no free 10.248.N.0/24 on this machine")


class Hosts:
    """The namespaces, their links and the bridge; the processes started in them."""

    def __init__(self):
        self.tag = "%s%d" % (PREFIX, os.getpid())
        self.bridge = self.tag + "br"
        self.net = free_subnet()
        self.procs = []
        self.made = False

    def ns(self, i):
        return "%sn%d" % (self.tag, i)

    def veth(self, i):  # the bridge's side
        return "%sh%d" % (self.tag, i)

    def ifname(self, i):  # the namespace's side
        return "%sp%d" % (self.tag, i)

    def addr(self, i):
        return "10.248.%d.%d" % (self.net, i + 1)

    @property
    def bridge_addr(self):
        return "10.248.%d.254" % self.net

    def create(self):
        self.made = True
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", self.bridge_addr + "/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        name = socket.gethostname()
        for i in range(HOSTS):
            ns = self.ns(i)
            os.makedirs("/etc/netns/" + ns, exist_ok=True)
            with open("/etc/netns/%s/hosts" % ns, "w") as f:
                f.write("127.0.0.1 localhost\n127.0.1.1 %s\n::1 localhost ip6-localhost\n" % name)
            run("ip", "netns", "add", ns)
            run("ip", "link", "add", self.veth(i), "type", "veth", "peer", "name", self.ifname(i))
            run("ip", "link", "set", self.ifname(i), "netns", ns)
            run("ip", "link", "set", self.veth(i), "master", self.bridge, "up")
            run("ip", "-n", ns, "addr", "add", self.addr(i) + "/24", "dev", self.ifname(i))
            run("ip", "-n", ns, "link", "set", self.ifname(i), "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def start(self, i, argv, log_path, env=None, cwd=None):
        """argv in namespace i (None: the root namespace), its output in log_path."""
        prefix = [] if i is None else ["ip", "netns", "exec", self.ns(i)]
        with open(log_path, "w") as log:
            p = subprocess.Popen(prefix + argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                 preexec_fn=die_with_parent)
        self.procs.append(p)
        return p

    def link(self, i, state):
        run("ip", "link", "set", self.veth(i), state)

    def destroy(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for i in range(HOSTS):
            kill_namespace_processes(self.ns(i))
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print("warning: process %d did not end after SIGKILL" % p.pid)
        if not self.made:
            return
        for i in range(HOSTS):
            run("ip", "netns", "del", self.ns(i), check=False)  # takes its veth pair with it
            run("ip", "link", "del", self.veth(i), check=False)
            shutil.rmtree("/etc/netns/" + self.ns(i), ignore_errors=True)
        run("ip", "link", "del", self.bridge, check=False)
        left = [l for l in run("ip", "-o", "link", "show", check=False).stdout.splitlines() if self.tag in l]
        left += [l for l in run("ip", "netns", "list", check=False).stdout.splitlines() if self.tag in l]
        if left:
            print("warning: left behind: %s" % left)


def wait_until(what, condition, deadline, out, alive=()):
    """Polls condition() until it is true; FAIL naming `what` past the deadline, or as soon as every
    process in `alive` has ended."""
    while True:
        got = condition()
        if got:
            return got
        if time.time() > deadline:
            fail("timed out waiting for " + what, out)
        if alive and all(p.poll() is not None for p in alive):
            fail("%s: every agent ended first (%s)" % (what, [p.returncode for p in alive]), out)
        time.sleep(0.1)


def events(path):
    """An agent's --events lines so far (a line still being written is left for the next read)."""
    found = []
    try:
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    found.append(json.loads(line))
    except FileNotFoundError:
        pass
    return found


def started_with(path, world, after=0):
    """The agent's group_started events past its first `after` lines, in a group of `world` nodes."""
    return [e for e in events(path)[after:] if e["event"] == "group_started" and e["group_world_size"] == world]


def check_names(hosts, out, name, i):
    """Check 1 for agent `name` in namespace i: its warning, and its events' node and hostname."""
    with open(os.path.join(out, name + ".log"), errors="replace") as f:
        log = f.read()
    warning = "using %s instead, the address of the interface that routes to the rendezvous endpoint" % hosts.addr(i)
    if "resolves only to loopback (127.0.1.1)" not in log or warning not in log:
        fail("%s did not warn that its name resolves to loopback and that it uses %s:\n%s" % (name, hosts.addr(i), log[-2000:]))
    for e in events(os.path.join(out, name + ".events")):
        if e["hostname"] != hosts.addr(i) or not e["node"].startswith(hosts.addr(i) + "_"):
            fail("%s's events name it %s / %s, not by its namespace's address %s" % (name, e["node"], e["hostname"], hosts.addr(i)))
    node = events(os.path.join(out, name + ".events"))[0]["node"]
    print("check 1: %s is %s (warned: name resolves to loopback)" % (name, node))


def check_store_record(hosts, out, run_id, cut_at, rejoin_at):
    """Checks 1 to 3 at the store (`dagsim store --record`): who wrote the rendezvous state, whom
    the states name (a node's descriptor holds its address as text), the cut node gone
    from the state by a survivor's write (its expiry) and back by its own."""
    peers, writes, ips_of_pid = {}, [], {}
    key = "/torch.rendezvous." + run_id  # the agents' c10d store is PyTorch's PrefixStore "/"
    with open(os.path.join(out, "store.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["op"] == "connect":
                peers[r["conn"]] = (r["peer"].rsplit(":", 1)[0], r["pid"])
            if r.get("key") == key and ((r["op"] == "compare_set" and r["written"]) or r["op"] == "set"):
                ip, pid = peers[r["conn"]]
                # The store ties a client in another network namespace of its host to its pid (it
                # reads that namespace's TCP tables): one process is one namespace's, never two.
                if pid is not None:
                    ips_of_pid.setdefault(pid, set()).add(ip)
                    if len(ips_of_pid[pid]) > 1:
                        fail("the store tied process %s to writes from %s" % (pid, sorted(ips_of_pid[pid])))
                state = bytes.fromhex(r["value"])
                # A node's address travels as a string: its length (u32, little-endian) then its
                # bytes (core/rpc/wire.h), so the prefix tells 10.248.N.2 from 10.248.N.254. (A
                # look for "no digit after it" read the pid's first byte, 0x30 for pid 22064.)
                writes.append((r["t"] / 1e9, ip, {a for a in map(hosts.addr, range(HOSTS))
                                                  if struct.pack("<I", len(a)) + a.encode() in state}))
    expected = {hosts.addr(i) for i in range(HOSTS)}
    writers = {ip for _, ip, _ in writes}
    named = set().union(*(n for _, _, n in writes)) if writes else set()
    if writers != expected:
        fail("the rendezvous state was written from %s, not from each namespace's address %s" % (sorted(writers), sorted(expected)))
    if named != expected:
        fail("the rendezvous states name %s, not every namespace's address %s" % (sorted(named), sorted(expected)))
    print("check 1: the store's record has the state written from %s, naming the same addresses" % sorted(writers))
    victim = hosts.addr(CUT)
    before = [n for t, _, n in writes if t < cut_at]
    expiry = [(ip, n) for t, ip, n in writes if cut_at < t < rejoin_at and victim not in n]
    if not before or victim not in before[-1]:
        fail("the last state before the cut does not name %s" % victim)
    if not expiry or expiry[0][0] == victim:
        fail("no survivor wrote a state without %s between the cut and the rejoin: %s" % (victim, expiry))
    back = [ip for t, ip, n in writes if t > rejoin_at and n == expected]
    if victim not in back:
        fail("after the rejoin, %s wrote no state naming all three" % victim)
    print("checks 2, 3: %s expired from the state by %s's write after the cut; back, by its own write, after the rejoin"
          % (victim, expiry[0][0]))


def launch_test(dagsim):
    hosts = Hosts()
    out = tempfile.mkdtemp(prefix="dagsim_multihost_")
    os.chmod(out, 0o755)
    try:
        hosts.create()
        deadline = time.time() + DEADLINE_S
        store = hosts.start(None, [dagsim, "store", "--host", hosts.bridge_addr, "--port", "0", "--record",
                                   os.path.join(out, "store.jsonl")], os.path.join(out, "store.log"))
        port = wait_until("the store's port", lambda: (lambda l: l[0].strip() if l and l[0].strip().isdigit() else None)(
            open(os.path.join(out, "store.log")).read().splitlines()), deadline, out, [store])
        run_id = "multihost"
        flags = ["--nnodes", "2:3", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", "%s:%s" % (hosts.bridge_addr, port), "--rdzv_id", run_id, "--max_restarts", "3",
                 "--monitor_interval", "0.5", "--stop-grace", "5",
                 # Expiry after 5 s of silence: a cut link is noticed soon, and a busy machine's
                 # late heartbeat is not taken for one.
                 "--rdzv_conf", "last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=5,join_timeout=120"]

        def agent(i, name):
            env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""), GLOO_SOCKET_IFNAME=hosts.ifname(i))
            argv = [dagsim, "launch", "--events", os.path.join(out, name + ".events"), "--log_dir",
                    os.path.join(out, "logs", name)] + flags + [DDP_JOB, out, str(STEPS), STEP_SECONDS]
            return hosts.start(i, argv, os.path.join(out, name + ".log"), env=env)

        os.makedirs(os.path.join(out, "logs"))
        names = ["agent%d" % i for i in range(HOSTS)]
        agents = [agent(i, names[i]) for i in range(HOSTS)]
        ev = lambda name: os.path.join(out, name + ".events")

        # The job forms with 3, each agent named by its address (check 1).
        wait_until("a group of 3 started on every agent", lambda: all(started_with(ev(n), 3) for n in names), deadline, out, agents)
        for i, n in enumerate(names):
            check_names(hosts, out, n, i)
        step = wait_until("a step trained by 3", lambda: (lambda s: s if s >= 2 else None)(checkpointed(out)), deadline, out, agents)
        print("trained to step %d with 3 nodes" % step)

        # Check 2: a partition. The cut host's agent goes on running, cut off.
        survivors = [n for i, n in enumerate(names) if i != CUT]
        seen = {n: len(events(ev(n))) for n in survivors}
        hosts.link(CUT, "down")
        cut_at = time.time()
        print("cut %s (%s) at step %d" % (hosts.ns(CUT), hosts.addr(CUT), checkpointed(out)))
        wait_until("the other two to re-form with 2", lambda: all(started_with(ev(n), 2, seen[n]) for n in survivors),
                   deadline, out, agents)
        print("re-formed with 2 after %.1f s" % (time.time() - cut_at))
        victim_node = events(ev(names[CUT]))[0]["node"]
        # Why they restarted: the expiry asks for a new round (nodes_waiting, docs/torchrun.md's
        # re-rendezvous on expiry), or their group failed; the store's record shows the expiry.
        why = {n: [e["event"] for e in events(ev(n))[seen[n]:]] for n in survivors}
        if agents[CUT].poll() is not None:
            fail("the cut agent ended (exit %s) before the others re-formed: a crash, not a partition" % agents[CUT].returncode, out)
        print("check 2: the others re-formed without %s (%s) while its agent ran on, cut off" % (victim_node, why))
        reformed = checkpointed(out)
        wait_until("2 steps trained by 2", lambda: checkpointed(out) >= reformed + 2, deadline, out, agents)
        if STEPS - 1 - checkpointed(out) < 8:
            fail("only %d steps are left for the rejoin: raise STEPS" % (STEPS - 1 - checkpointed(out)), out)

        # Check 3: the host comes back (its old agent gone, as after a reboot) and rejoins.
        agents[CUT].kill()
        agents[CUT].wait()
        wait_until("the cut namespace's workers to die with their agent",
                   lambda: not run("ip", "netns", "pids", hosts.ns(CUT), check=False).stdout.split(), deadline, out)
        seen = {n: len(events(ev(n))) for n in survivors}
        hosts.link(CUT, "up")
        rejoin_at = time.time()
        names.append("agent%d_rejoined" % CUT)
        agents.append(agent(CUT, names[-1]))
        live = [agents[i] for i in range(HOSTS) if i != CUT] + [agents[-1]]
        print("link up, agent started again in %s at step %d" % (hosts.ns(CUT), checkpointed(out)))
        wait_until("the job to re-form with 3", lambda: started_with(ev(names[-1]), 3) and
                   all(started_with(ev(n), 3, seen[n]) for n in survivors), deadline, out, live)
        check_names(hosts, out, names[-1], CUT)
        print("check 3: re-formed with 3 at step %d" % checkpointed(out))

        # Check 4: the job ends, and ends right.
        for p in live:
            try:
                p.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                fail("the agents had not ended by the deadline", out)
        codes = [p.returncode for p in live]
        if codes != [0] * len(live):
            fail("the agents exited %s" % codes, out)
        worlds = [w for _, _, w, _ in worker_starts(out)]
        print("worker starts' world sizes, in order:", worlds)
        after_cut = worlds.index(2) if 2 in worlds else -1
        if after_cut < 0 or 3 not in worlds[:after_cut] or 3 not in worlds[after_cut:]:
            fail("the job did not run with 3, then 2, then 3 nodes: %s" % worlds, out)
        check_store_record(hosts, out, run_id, cut_at, rejoin_at)
        check_against_reference(out, STEPS)
        print("PASS")
    finally:
        tear_down(hosts, out)


def tear_down(hosts, out):
    """The namespaces go; the output folder too, unless DAGSIM_MULTIHOST_KEEP asks to keep it."""
    hosts.destroy()
    if os.environ.get("DAGSIM_MULTIHOST_KEEP"):
        print("kept: " + out)
    else:
        shutil.rmtree(out, ignore_errors=True)


def static_test(dagsim):
    hosts = Hosts()
    out = tempfile.mkdtemp(prefix="dagsim_multihost_static_")
    os.chmod(out, 0o755)
    try:
        hosts.create()
        steps = 6
        for name, launcher, port in (("dagsim", [dagsim, "launch"], 29500),
                                     ("torchrun", ["/usr/bin/python3", "-m", "torch.distributed.run"], 29501)):
            job = os.path.join(out, name)
            os.makedirs(job)
            # -r 1 -t 1: Debian's torchrun 1.13 on Python 3.11 cannot parse its default -r 0.
            flags = ["--nnodes", "2", "--nproc_per_node", "2", "--master_addr", hosts.addr(0), "--master_port",
                     str(port), "--rdzv_id", "static", "--monitor_interval", "0.5", "-r", "1", "-t", "1"]
            agents = []
            started = time.time()
            for i in (1, 0):
                env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""), GLOO_SOCKET_IFNAME=hosts.ifname(i))
                argv = launcher + flags + ["--node_rank", str(i), "--log_dir", os.path.join(job, "logs%d" % i),
                                           DDP_JOB, job, str(steps)]
                agents.append(hosts.start(i, argv, os.path.join(out, "%s%d.log" % (name, i)), env=env))
                time.sleep(0.5)
            codes = []
            for agent in agents:
                try:
                    codes.append(agent.wait(timeout=240))
                except subprocess.TimeoutExpired:
                    codes.append("timeout")
            pairs = sorted((rank, world) for _, rank, world, _ in worker_starts(job))
            print("static %s: agents exited %s, workers (rank, world) %s, %.1f s" % (name, codes, pairs, time.time() - started))
            if codes != [0, 0] or pairs != [(0, 4), (1, 4), (2, 4), (3, 4)]:
                fail("the static backend across two namespaces under %s" % name, out)
            check_against_reference(job, steps)
        print("PASS: the static backend across two namespaces, the same ranks and parameters under both launchers")
    finally:
        tear_down(hosts, out)


def doc_section(path, title):
    with open(path) as f:
        text = f.read()
    start = text.index("## " + title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def fenced(section, lang):
    return re.findall(r"```%s\n(.*?)```" % lang, section, re.S)


def tcp_test(dagsim):
    """docs/tcp.md's procedure across two of the namespaces, its commands read from the document."""
    section = doc_section(os.path.join(ROOT, "docs", "tcp.md"), "Across hosts")
    cluster_id_cmd = re.search(r"`(printf '0x%s\\n' [^`]+)`", section).group(1)
    (peers_doc,) = fenced(section, "json")
    credentials_sh, hosts_sh = fenced(section, "sh")
    doc_hosts = re.findall(r"\d+\.\d+\.\d+\.\d+", peers_doc)[:2]  # the document's two hosts
    hosts = Hosts()
    out = tempfile.mkdtemp(prefix="dagsim_multihost_tcp_")
    os.chmod(out, 0o755)
    try:
        hosts.create()
        # `dagsim` in the commands is this build's.
        env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(dagsim)) + ":" + os.environ.get("PATH", ""))
        env.pop("DAGSIM_SECRET", None)
        env.pop("DAGSIM_SECRET_FILE", None)
        place = lambda text: text.replace(doc_hosts[0], hosts.addr(0)).replace(doc_hosts[1], hosts.addr(1))
        made = subprocess.run(["bash", "-euc", place(credentials_sh)], capture_output=True, text=True, env=env, cwd=out)
        if made.returncode != 0 or oct(os.stat(os.path.join(out, "ca", "ca.key")).st_mode & 0o777) != "0o600":
            fail("the credentials' commands failed: %s" % made.stderr)
        cluster_id = subprocess.run(["bash", "-c", cluster_id_cmd], capture_output=True, text=True, check=True).stdout.strip()
        peers = json.loads(place(peers_doc))
        peers["cluster_id"] = cluster_id
        # Host blocks: "# host A (...)" opens each; the document's addresses become the namespaces'.
        blocks = re.split(r"(?m)^(?=# host )", place(hosts_sh).strip())
        blocks = [b for b in blocks if b.strip()]
        if len(blocks) != 2:
            fail("docs/tcp.md's Across hosts commands have %d host blocks, not 2" % len(blocks))
        procs = []
        for i, block in enumerate(blocks):
            home = os.path.join(out, "host%d" % i)  # each host's own folder: "Copy the scenario and the peers file"
            os.makedirs(home)
            shutil.copy(os.path.join(ROOT, "scenarios", "examples", "seed_example.toml"), home)
            with open(os.path.join(home, "peers.json"), "w") as f:
                json.dump(peers, f)
            # "copy each directory to its process's host only": the ones this host's commands name.
            for path in re.findall(r"DAGSIM_CREDENTIALS=(\S+)", block):
                shutil.copytree(os.path.join(out, path), os.path.join(home, path))
            # As written; then the exit codes of what it started in the foreground and background.
            script = block + '\nnode=$?\nlauncher=0\nif [ -n "${!:-}" ]; then wait $!; launcher=$?; fi\n' \
                             'echo "exit codes: node $node launcher $launcher" >&2\n[ $node = 0 ] && [ $launcher = 0 ]\n'
            with open(os.path.join(home, "commands.sh"), "w") as f:
                f.write(script)
            procs.append(hosts.start(i, ["bash", "commands.sh"], os.path.join(out, "host%d.out" % i), env=env, cwd=home))
        deadline = time.time() + 240
        for p in procs:
            try:
                p.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                fail("the hand-started run had not ended in 240 s", out)
        outputs = []
        for i in range(2):
            with open(os.path.join(out, "host%d.out" % i), errors="replace") as f:
                outputs.append(f.read())
            print("--- host %d (%s):\n%s" % (i, hosts.ns(i), outputs[-1][-1500:]))
        if [p.returncode for p in procs] != [0, 0]:
            fail("the hosts' commands exited %s" % [p.returncode for p in procs])
        report = json.loads(outputs[0][outputs[0].index("{"):outputs[0].rindex("}") + 1])
        if report.get("passed") is not True:
            fail("the launcher's report does not say passed: %s" % json.dumps(report)[:2000])
        judged = subprocess.run([dagsim, "judge", os.path.join(out, "host0", "run")], capture_output=True, text=True)
        print("dagsim judge run/: exit %d\n%s" % (judged.returncode, judged.stdout[-800:]))
        if judged.returncode != 0:
            fail("dagsim judge run/ does not pass the gathered records")
        print("PASS: docs/tcp.md's Across hosts procedure, run as written across %s and %s" % (hosts.addr(0), hosts.addr(1)))
    finally:
        tear_down(hosts, out)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("launch", "tcp", "static"):
        sys.exit("usage: multihost_test.py launch|tcp|static DAGSIM")
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        sys.exit(77)
    probe = "%s%dprobe" % (PREFIX, os.getpid())
    if shutil.which("ip") is None or run("ip", "netns", "add", probe, check=False).returncode != 0:
        print("SKIP: `ip netns add` is not available here (iproute2, network namespaces)")
        sys.exit(77)
    run("ip", "netns", "del", probe, check=False)
    if sys.argv[1] in ("launch", "static") and subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"],
                                                  capture_output=True).returncode != 0:
        print("SKIP: /usr/bin/python3 cannot import torch.distributed (scripts/deps.sh test installs it)")
        sys.exit(77)
    clean_leftovers()
    dagsim = os.path.abspath(sys.argv[2])
    started = time.time()
    {"launch": launch_test, "tcp": tcp_test, "static": static_test}[sys.argv[1]](dagsim)
    print("wall time: %.1f s" % (time.time() - started))


if __name__ == "__main__":
    main()
