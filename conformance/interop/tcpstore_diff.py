# The TCPStore diff (issue 24 item 3): the same PyTorch 1.13 client operations against PyTorch's own
# server and against `dagsim store`, their outcomes compared probe by probe.
#
#   tcpstore_diff.py probe HOST PORT     runs every probe against the store at HOST:PORT and prints
#                                        one JSON object: probe name -> outcome
#   tcpstore_diff.py compare A B         compares two such files (A: PyTorch's server, B: dagsim's)
#   tcpstore_diff.py raw-clients HOST PORT N  N connections speaking the protocol from one process
#                                        (a PyTorch client costs a thread and three descriptors),
#                                        all open at once, each adding to a key twice
#   tcpstore_diff.py clients HOST PORT N N PyTorch clients (in processes of 1,000), all connected at
#                                        once, each adding to a key before and after that moment:
#                                        prints how many were counted both times
#
# An outcome is the value a call returned, "closed" (the server closed the connection: PyTorch's
# server does that on any error, its protocol has no error reply), or "timeout". Each probe uses
# clients of its own, so a closed connection costs only that probe. `compare` exits 0 when every
# probe agrees or differs exactly as documented below (each difference with its reason, and the
# same text in docs/cli.md), 1 otherwise, naming each probe. Exits 77 when torch cannot be imported.
import datetime
import json
import sys
import threading
import time

# probe -> (PyTorch's outcome, dagsim's outcome, why they differ)
DOCUMENTED = {
    "wait woken by another client's compare_set creating the key": (
        "timeout", "woken",
        "PyTorch 1.13's server wakes waiters on set and add only; a key created by compare_set is "
        "there, and dagsim wakes every WAIT that waited for it"),
}


def outcome_of(call):
    try:
        value = call()
    except Exception as e:  # noqa: BLE001 - 1.13 raises RuntimeError, TimeoutError and ValueError
        text = f"{type(e).__name__}: {e}"
        if "Timeout" in text or "timed out" in text:  # also TimeoutError
            return "timeout"
        if any(s in text for s in ("reset", "Broken pipe", "closed", "EOF", "Connection refused")):
            return "closed"
        return "error: " + text.splitlines()[0][:120]
    return shown(value)


def shown(value):
    if isinstance(value, bytes):
        return "bytes:" + (value.decode("latin-1") if len(value) <= 64 else f"<{len(value)} bytes>")
    if isinstance(value, (tuple, list)):
        return [shown(v) for v in value]
    return value


def probes(dist, host, port):
    def client(timeout=5.0):
        return dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=timeout))

    out = {}

    def probe(name, call):
        out[name] = outcome_of(call)

    def set_then(key, value, then):
        def run():
            c = client()
            c.set(key, value)
            return then(c)
        return run

    probe("num_keys of a fresh store", lambda: client().num_keys())
    probe("get after set", set_then("a", "1", lambda c: c.get("a")))
    probe("binary value", set_then("bin", b"\x00\xff\n", lambda c: c.get("bin")))
    probe("empty value", set_then("empty", b"", lambda c: c.get("empty")))
    probe("4 MiB value", set_then("v4", bytes(range(256)) * 16384, lambda c: c.get("v4") == bytes(range(256)) * 16384))
    probe("100 KiB key", set_then("k" * 102400, "v", lambda c: c.get("k" * 102400)))
    probe("1 MiB key", set_then("m" * (1 << 20), "v", lambda c: c.get("m" * (1 << 20))))
    probe("add to an absent key", lambda: client().add("n", 5))
    probe("add a negative delta", lambda: client().add("n", -7))
    probe("the sum as text", lambda: client().get("n"))
    for text in ["3abc", " 5", "+5", "0x10", "5\n", " -7x", "\t\n 8", "007", "abc", "", "-", "- 5",
                 "99999999999999999999", "9223372036854775807", "-9223372036854775808"]:
        probe(f"add 1 to {text!r}", set_then("t" + text, text, lambda c, k="t" + text: c.add(k, 1)))
    probe("add past 2^63", set_then("big", str(2**63 - 1), lambda c: (c.add("big", 1), c.get("big"))))
    probe("add below -2^63", set_then("small", str(-2**63), lambda c: (c.add("small", -1), c.get("small"))))
    probe("add 0 to an absent key creates it", lambda: (client().add("zero", 0), client().get("zero")))
    probe("compare_set absent, expected empty", lambda: client().compare_set("cs1", "", "x"))
    probe("compare_set absent, expected other", lambda: client().compare_set("cs2", "e", "y"))
    probe("compare_set absent afterwards", lambda: client(1).get("cs2"))
    probe("compare_set held value", lambda: client().compare_set("cs1", "x", "z"))
    probe("compare_set other value", lambda: client().compare_set("cs1", "x", "w"))
    probe("compare_set to an empty value", lambda: (client().compare_set("cs3", "", ""), client().num_keys()))
    probe("delete_key present", set_then("d", "1", lambda c: c.delete_key("d")))
    probe("delete_key absent", lambda: client().delete_key("d"))
    probe("num_keys after the probes above", lambda: client().num_keys())
    probe("get of an absent key times out", lambda: client(1).get("never"))
    probe("wait on an absent key times out", lambda: client().wait(["never"], datetime.timedelta(milliseconds=300)))

    def wait_on_present(n):
        def run():
            c = client(30)
            keys = [f"w{n}/{i}" for i in range(n)]
            for k in keys:
                c.set(k, "1")
            c.wait(keys)
            return "returned"
        return run

    probe("wait on 5,000 present keys", wait_on_present(5000))

    def woken_by(write):
        def run():
            key = "wake/" + write
            waiter, writer = client(), client()
            result = []

            def wait():
                result.append(outcome_of(lambda: waiter.wait([key], datetime.timedelta(seconds=2)) or "woken"))

            t = threading.Thread(target=wait)
            t.start()
            time.sleep(0.3)
            {"set": lambda: writer.set(key, "v"), "add": lambda: writer.add(key, 1),
             "compare_set": lambda: writer.compare_set(key, "", "v")}[write]()
            t.join()
            return result[0]
        return run

    probe("wait woken by another client's set", woken_by("set"))
    probe("wait woken by another client's add", woken_by("add"))
    probe("wait woken by another client's compare_set creating the key", woken_by("compare_set"))
    probe("num_keys at the end", lambda: client().num_keys())
    return out


# Each 1.13 client holds a socket, a background thread and its control pipe (three descriptors),
# so the clients are spread over processes of at most this many.
CLIENTS_PER_PROCESS = 1000


def raw_clients(host, port, n):
    """n connections speaking 1.13's protocol directly (ADD is type 3: a key as a uint64 length and
    bytes, an int64 delta; the reply an int64), all open at once: each adds 1 to "raw" once every
    connection is open, and again after the last one's add was answered. Returns how many were
    counted both times."""
    import resource
    import socket
    import struct
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    def add(sock, key, delta):
        sock.sendall(bytes([3]) + struct.pack("<Q", len(key)) + key + struct.pack("<q", delta))
        reply = b""
        while len(reply) < 8:
            chunk = sock.recv(8 - len(reply))
            if not chunk:
                raise RuntimeError("the store closed a connection")
            reply += chunk
        return struct.unpack("<q", reply)[0]

    socks = [socket.create_connection((host, port), timeout=60) for _ in range(n)]
    first = max(add(s, b"/raw", 1) for s in socks)
    second = max(add(s, b"/raw", 1) for s in socks) - first
    for s in socks:
        s.close()
    return first if first == second else f"{first} counted, then {second}"


def many_clients(host, port, n):
    import subprocess
    parts = [min(CLIENTS_PER_PROCESS, n - i) for i in range(0, n, CLIENTS_PER_PROCESS)]
    procs = [subprocess.Popen([sys.executable, __file__, "clients-part", host, str(port), str(k), str(n)],
                              stdout=subprocess.PIPE, text=True) for k in parts]
    answers = [p.communicate()[0].strip() for p in procs]
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"a client process failed: {answers}")
    return sum(int(a) for a in answers)


def clients_part(dist, host, port, k, n):
    """k clients connect and add 1 to "clients"; once all n are counted (so every client of every
    process is connected at once), each adds 1 to "after"; prints how many of its own succeeded."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    timeout = datetime.timedelta(seconds=120)
    clients = [dist.TCPStore(host, port, is_master=False, timeout=timeout) for _ in range(k)]
    for c in clients:
        c.add("clients", 1)
    deadline = time.monotonic() + 120
    while int(clients[0].get("clients")) < n:
        if time.monotonic() > deadline:
            sys.exit("the other clients never came")
        time.sleep(0.05)
    for c in clients:
        c.add("after", 1)
    return k


def compare(a, b):
    torch_out, dagsim_out = json.load(open(a)), json.load(open(b))
    bad = 0
    for name in sorted(torch_out.keys() | dagsim_out.keys()):
        t, d = torch_out.get(name, "<missing>"), dagsim_out.get(name, "<missing>")
        if t == d:
            print(f"same: {name}: {t!r}")
        elif name in DOCUMENTED and DOCUMENTED[name][:2] == (t, d):
            print(f"documented: {name}: PyTorch {t!r}, dagsim {d!r} ({DOCUMENTED[name][2]})")
        else:
            bad += 1
            print(f"DIFFERENT: {name}: PyTorch {t!r}, dagsim {d!r}")
    for name, (t, d, _) in DOCUMENTED.items():
        if (torch_out.get(name), dagsim_out.get(name)) != (t, d):
            print(f"note: documented difference {name!r} did not show as documented")
    print(f"{len(torch_out)} probes, {bad} undocumented differences")
    return 1 if bad else 0


def main():
    if sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    try:
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
        print(f"SKIP: /usr/bin/python3 cannot import torch.distributed ({e}); install python3-torch", file=sys.stderr)
        sys.exit(77)
    host, port = sys.argv[2], int(sys.argv[3])
    if sys.argv[1] == "probe":
        print(json.dumps(probes(dist, host, port), indent=1, sort_keys=True))
    elif sys.argv[1] == "raw-clients":
        print(raw_clients(host, port, int(sys.argv[4])))
    elif sys.argv[1] == "clients":
        counted = many_clients(host, port, int(sys.argv[4]))
        c = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=10))
        print(counted if int(c.get("after")) == counted else f"{counted} connected, {int(c.get('after'))} after")
    elif sys.argv[1] == "clients-part":
        print(clients_part(dist, host, port, int(sys.argv[4]), int(sys.argv[5])))
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")


if __name__ == "__main__":
    main()
