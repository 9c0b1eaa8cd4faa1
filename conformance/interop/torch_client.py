# A PyTorch 1.13 TCPStore client (torch.distributed.TCPStore, is_master=False) against the store at
# HOST PORT (dagsim's `dagsim store`), asserting every operation 1.13's Python API has: set, get,
# add, compare_set (its three cases), wait (woken by another client's set, and timing out),
# num_keys, delete_key, world_size's init key, large values, and many clients at once.
# check and multi_get are not in 1.13's Python API (they came in 2.x), so they are not exercised.
# Exits 0 when every assertion holds, 1 on the first that fails, 77 when torch cannot be imported.
import datetime
import sys
import threading
import time

try:
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
    print(f"SKIP: /usr/bin/python3 cannot import torch.distributed ({e}); install python3-torch", file=sys.stderr)
    sys.exit(77)

host, port = sys.argv[1], int(sys.argv[2])
timeout = datetime.timedelta(seconds=10)


def client(**kwargs):
    return dist.TCPStore(host, port, is_master=False, timeout=timeout, **kwargs)


def expect(what, got, want):
    if got != want:
        print(f"FAIL: {what}: got {got!r}, expected {want!r}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


s = client()
s.set("a", "1")
expect("get after set", s.get("a"), b"1")
s.set("a", b"\x00\xffbinary")
expect("binary values round-trip", s.get("a"), b"\x00\xffbinary")
expect("add to an absent key", s.add("n", 5), 5)
expect("add a negative delta", s.add("n", -2), 3)
expect("add keeps decimal text", s.get("n"), b"3")
expect("compare_set on an absent key with empty expected writes", s.compare_set("b", "", "x"), b"x")
expect("compare_set on an absent key with other expected answers expected", s.compare_set("c", "e", "y"), b"e")
expect("compare_set with the held value writes", s.compare_set("b", "x", "z"), b"z")
expect("compare_set with another value answers the held one", s.compare_set("b", "x", "w"), b"z")
expect("num_keys counts /a /n /b", s.num_keys(), 3)

# wait: woken by another client's set, while a third client's queries go on being answered.
setter, other = client(), client()
woke = []


def set_later():
    time.sleep(0.3)
    setter.set("late", "v")


start = time.monotonic()
threading.Thread(target=set_later).start()
worker = threading.Thread(target=lambda: woke.append(other.add("busy", 1)))
worker.start()
s.wait(["late", "a"])
elapsed = time.monotonic() - start
worker.join()
expect("wait returns once another client set the key (>= 0.25 s)", elapsed >= 0.25, True)
expect("another client was answered while the wait was pending", woke, [1])
expect("get of the waited key", s.get("late"), b"v")

# A wait that times out raises (1.13: "Socket Timeout"); that client's socket is then spent, as in PyTorch.
spent = client()
try:
    spent.wait(["never"], datetime.timedelta(milliseconds=300))
    expect("wait on a missing key times out", "returned", "raised")
except RuntimeError as e:
    expect("wait on a missing key times out", "Timeout" in str(e), True)

expect("delete_key of a present key", s.delete_key("a"), True)
expect("delete_key of an absent key", s.delete_key("a"), False)
expect("num_keys after the delete (/n /b /late /busy)", s.num_keys(), 4)

# world_size: a non-master client adds to the init key on construction.
client(world_size=2)
expect("a world_size client adds 1 to init/ (raw key, no prefix)", s.num_keys(), 5)

big = bytes(range(256)) * 4096 * 4  # 4 MiB
s.set("big", big)
expect("a 4 MiB value round-trips", s.get("big") == big, True)

# Many clients adding at once: every add counted once.
def adder():
    c = client()
    for _ in range(50):
        c.add("counter", 1)


threads = [threading.Thread(target=adder) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
expect("8 clients x 50 adds", s.get("counter"), b"400")
print("PASS: torch.distributed.TCPStore 1.13 client against the dagsim store")
