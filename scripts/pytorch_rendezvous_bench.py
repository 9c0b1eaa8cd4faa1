#!/usr/bin/python3
# PyTorch 1.13's c10d dynamic rendezvous measured on this machine, for scripts/bench_rendezvous_tcp.sh
# (issue 11 item 8): one run of one case, printed as one JSON object on standard output.
#
# Topology, as dagsim's rendezvous scenarios: one process hosts a TCPStore server (is_master=True,
# as worker0 hosts dagsim's store) and four worker processes each build what torchrun builds for
# --rdzv_backend=c10d: a TCPStore client, a C10dRendezvousBackend over it and a
# DynamicRendezvousHandler, then call next_rendezvous at one instant (a start barrier on
# CLOCK_MONOTONIC, which every process shares). Workers are forked from this process after torch
# is imported, so the import is not timed; each reseeds `random`, since fork copies the parent's
# state and next_rendezvous's first-round delay (uniform 0-0.3 s) would otherwise be the same on
# every node, which torchrun's separate processes never see.
#
# Cases:
#   formation      min = max = 4, handler from DynamicRendezvousHandler.from_backend exactly as
#                  torchrun makes it (RendezvousTimeout defaults, keep-alive 5 s x 3).
#   replacement    min = max = 4, keep-alive 1 s x 2. After the round forms, worker 3 is SIGKILLed
#                  and a fresh node (forked before the run, building its store client and handler
#                  only when told) joins at once, as a scheduler restarting the dead node would.
#                  Survivors run torchrun's agent monitor loop (sleep monitor interval, then
#                  num_nodes_waiting; > 0 means next_rendezvous) with a 1 s interval.
#   agent_restart  min = 2, max = 4, last_call 2 s, keep-alive 1 s x 2 (dagsim's
#                  rendezvous_dead_participant). No replacement: the survivors' workers are taken to
#                  fail at the kill (the best case: a collective with the dead peer fails at once),
#                  and each agent sees it at its next 1 s monitor tick and restarts (next_rendezvous),
#                  as torchrun's _invoke_run does with max_restarts > 0.
#   poll_only      agent_restart's settings, but the survivors only poll num_nodes_waiting (nothing
#                  fails): shows whether 1.13 re-forms after a death by itself (PyTorch #111646).
#   store_rtt      loopback round trip of one TCPStore get and one compare_set, client to server
#                  process, N samples.
# The kill comes 2 s + (run_index mod 10) x 100 ms after the victim's return, so ten runs sweep the
# phase of the victim's last heartbeat over its 1 s interval (the scripts do the same to dagsim).
#
# Keep-alive: the figure is for 1 s x 2, the default here. With it 1.13 expires live members:
# a node's last heartbeat before its return is the one it wrote joining (up to about 1.3 s before,
# when it then waited on the 1 s SYNC poll) and its keep-alive timer first fires 1 s after the
# return, by when its own sync's sanitize has dropped it from participants and last_heartbeats, so
# it never beats again. Only the node that completed the round stays. --keep-alive-max-attempt 3
# leaves room for that gap; each run reports survivors_expired_alive.
#
# Usage: /usr/bin/python3 scripts/pytorch_rendezvous_bench.py CASE [--run-index K] [--watch-s W]
#        [--samples N] [--keep-alive-max-attempt M]
# Exits 0 with {"ok": true, ...}, 1 with {"ok": false, "error": ...}, 77 when torch is missing.
import argparse
import json
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import random
import signal
import statistics
import sys
import time
import traceback
from datetime import timedelta

try:
    import torch
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
        DynamicRendezvousHandler,
        RendezvousSettings,
        RendezvousTimeout,
        _BackendRendezvousStateHolder,
    )
except Exception as e:  # noqa: BLE001 - any import failure means "no torch here"
    print(json.dumps({"ok": False, "error": f"cannot import torch.distributed: {e}"}))
    sys.exit(77)

HOST = "127.0.0.1"
NODES = 4
VICTIM = 3
MONITOR_INTERVAL_S = 1.0  # torchrun's default is 5 s; dagsim's scenarios use 1 s
STORE_TIMEOUT = timedelta(seconds=60)  # torchrun's c10d read_timeout default
CASES = ("formation", "replacement", "agent_restart", "poll_only", "store_rtt")


def now():
    return time.monotonic()


KEEP_ALIVE_MAX_ATTEMPT = 2  # --keep-alive-max-attempt


def settings_for(case):
    """(min_nodes, max_nodes, RendezvousTimeout, keep_alive_interval_s, keep_alive_max_attempt)."""
    if case == "formation":
        return 4, 4, RendezvousTimeout(), 5.0, 3  # from_backend's fixed keep-alive
    if case == "replacement":
        return 4, 4, RendezvousTimeout(), 1.0, KEEP_ALIVE_MAX_ATTEMPT
    return 2, 4, RendezvousTimeout(last_call=timedelta(seconds=2)), 1.0, KEEP_ALIVE_MAX_ATTEMPT


class TimedBackend(C10dRendezvousBackend):
    """C10dRendezvousBackend that logs each store call: op, start, end, and for a successful
    compare-and-set the round and completeness of the state it wrote."""

    def __init__(self, store, run_id, log):
        self._log = log
        t = now()
        super().__init__(store, run_id)  # its constructor does one compare_set (the sentinel)
        log.append({"op": "init_cas", "t": t, "t_end": now()})

    def get_state(self):
        t = now()
        r = super().get_state()
        self._log.append({"op": "get", "t": t, "t_end": now()})
        return r

    def set_state(self, state, token=None):
        t = now()
        r = super().set_state(state, token)
        rec = {"op": "cas", "t": t, "t_end": now(), "ok": bool(r is not None and r[2])}
        if rec["ok"]:
            s = pickle.loads(state)
            rec["round"], rec["complete"] = s.round, s.complete
        self._log.append(rec)
        return r


def make_handler(case, run_id, port, log):
    store = TCPStore(HOST, port, None, False, STORE_TIMEOUT)
    backend = TimedBackend(store, run_id, log)
    min_nodes, max_nodes, timeout, ka_s, ka_n = settings_for(case)
    if case == "formation":
        return DynamicRendezvousHandler.from_backend(run_id, store, backend, min_nodes, max_nodes, timeout)
    # 1.13's from_backend fixes keep-alive at 5 s x 3; build the handler as it does, with ours.
    settings = RendezvousSettings(run_id, min_nodes, max_nodes, timeout,
                                  keep_alive_interval=timedelta(seconds=ka_s), keep_alive_max_attempt=ka_n)
    node = DynamicRendezvousHandler._node_desc_generator.generate()
    holder = _BackendRendezvousStateHolder(backend, settings)
    return DynamicRendezvousHandler(node, settings, backend.name, store, holder)


def rdzv(handler):
    t = now()
    _, rank, world = handler.next_rendezvous()
    return {"start": t, "end": now(), "rank": rank, "world": world,
            "round": handler._state_holder.state.round}


def state_view(handler):
    s = handler._state_holder.state
    return {"round": s.round, "complete": s.complete, "participants": len(s.participants),
            "wait_list": len(s.wait_list), "closed": s.closed,
            "in_round": handler._this_node in s.participants,
            "has_heartbeat": handler._this_node in s.last_heartbeats}


def store_server(conn):
    store = TCPStore(HOST, 0, None, True, STORE_TIMEOUT, wait_for_workers=False)
    conn.send({"kind": "port", "port": store.port})
    conn.recv()  # until the driver says stop (or dies: EOFError)


def worker(idx, case, run_id, port, watch_s, conn):
    random.seed()
    log = []
    try:
        handler = make_handler(case, run_id, port, log)
        conn.send({"kind": "ready", "pid": os.getpid()})
        t0 = conn.recv()
        while now() < t0:
            time.sleep(max(0.0, t0 - now()))
        first = rdzv(handler)
        conn.send({"kind": "formed", "idx": idx, "pid": os.getpid(), "call": first,
                   "log": log if idx == VICTIM or case == "formation" else []})
        if case == "formation" or idx == VICTIM:
            conn.recv()  # the victim waits for its SIGKILL; others for "stop"
            return
        # torchrun's agent loop (_invoke_run): sleep the monitor interval, look at the workers
        # (here: a "fail" message from the driver), else ask num_nodes_waiting.
        # The kill comes 2-2.9 s after the victim's return, itself within about 1 s of ours.
        polls, why, end = [], None, now() + 4.0 + watch_s
        while now() < end:
            time.sleep(MONITOR_INTERVAL_S)
            if conn.poll() and conn.recv() == "fail":
                why = "worker_failed"
                break
            t = now()
            n = handler.num_nodes_waiting()
            polls.append({"t": t, "waiting": n})
            if n > 0:
                why = "nodes_waiting"
                break
        msg = {"kind": "after", "idx": idx, "why": why, "polls": polls, "view": state_view(handler)}
        if why is not None:
            msg["call"] = rdzv(handler)
        msg["log"] = log
        conn.send(msg)
        conn.recv()
    except (EOFError, KeyboardInterrupt):
        pass
    except Exception:  # noqa: BLE001 - reported to the driver
        conn.send({"kind": "error", "idx": idx, "error": traceback.format_exc()})


def replacement(case, run_id, port, conn):
    random.seed()
    log = []
    try:
        conn.recv()  # "go", sent at the kill
        t_go = now()
        handler = make_handler(case, run_id, port, log)
        call = rdzv(handler)
        conn.send({"kind": "after", "idx": NODES, "why": "replacement", "t_go": t_go, "call": call,
                   "log": log, "view": state_view(handler)})
        conn.recv()
    except (EOFError, KeyboardInterrupt):
        pass
    except Exception:  # noqa: BLE001
        conn.send({"kind": "error", "idx": NODES, "error": traceback.format_exc()})


class Driver:
    def __init__(self):
        self.ctx = mp.get_context("fork")
        self.procs, self.conns = [], {}

    def start(self, target, key, *args):
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=target, args=(*args, child), daemon=True)
        p.start()
        child.close()
        self.procs.append(p)
        self.conns[key] = parent
        return p

    def recv(self, key, deadline):
        conn = self.conns[key]
        if not conn.poll(max(0.0, deadline - now())):
            raise TimeoutError(f"no message from {key} in time")
        msg = conn.recv()
        if msg.get("kind") == "error":
            raise RuntimeError(f"{key}: {msg['error']}")
        return msg

    def recv_any(self, keys, deadline):
        """Messages from each of `keys`, in arrival order."""
        pending, out = {self.conns[k]: k for k in keys}, {}
        while pending:
            ready = mpc.wait(list(pending), timeout=max(0.0, deadline - now()))
            if not ready:
                raise TimeoutError(f"no message from {sorted(pending.values())} in time")
            for c in ready:
                k = pending.pop(c)
                msg = c.recv()
                if msg.get("kind") == "error":
                    raise RuntimeError(f"{k}: {msg['error']}")
                out[k] = msg
        return out

    def stop(self):
        for c in self.conns.values():
            try:
                c.send("stop")
            except (BrokenPipeError, OSError):
                pass
        for p in self.procs:
            p.join(0.5)
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()


def ops_summary(logs):
    rtts = [1e3 * (r["t_end"] - r["t"]) for log in logs for r in log]
    return {"store_calls": len(rtts), "store_call_ms_median": statistics.median(rtts) if rtts else None,
            "store_call_ms_min": min(rtts) if rtts else None}


def completion_commit(logs, rnd):
    """Midpoint of the successful compare-and-set that wrote round `rnd` complete."""
    hits = [r for log in logs for r in log if r["op"] == "cas" and r.get("ok") and r.get("round") == rnd
            and r.get("complete")]
    if not hits:
        return None
    first = min(hits, key=lambda r: r["t_end"])
    return (first["t"] + first["t_end"]) / 2


def run_case(case, run_index, watch_s):
    d = Driver()
    run_id = f"bench{os.getpid()}"
    try:
        d.start(store_server, "server")
        port = d.recv_any(["server"], now() + 30)["server"]["port"]
        workers = [d.start(worker, i, i, case, run_id, port, watch_s) for i in range(NODES)]
        if case == "replacement":
            d.start(replacement, NODES, case, run_id, port)
        ready = d.recv_any(list(range(NODES)), now() + 60)
        t0 = now() + 0.2
        for i in range(NODES):
            d.conns[i].send(t0)
        formed = d.recv_any(list(range(NODES)), now() + 120)
        calls = [formed[i]["call"] for i in range(NODES)]
        start, last_start = min(c["start"] for c in calls), max(c["start"] for c in calls)
        logs = [formed[i]["log"] for i in range(NODES)]
        commit = completion_commit(logs, 0) if case == "formation" else None
        out = {"ok": True, "case": case, "run_index": run_index,
               "formation_ms": 1e3 * (max(c["end"] for c in calls) - start),
               "first_return_ms": 1e3 * (min(c["end"] for c in calls) - start),
               "last_start_ms": 1e3 * (last_start - start),
               "ranks": sorted(c["rank"] for c in calls), "world": [c["world"] for c in calls]}
        if commit is not None:
            out["completion_after_last_join_ms"] = 1e3 * (commit - last_start)
            out.update(ops_summary(logs))
        if case == "formation":
            return out
        victim_end = formed[VICTIM]["call"]["end"]
        t_kill = victim_end + 2.0 + 0.1 * (run_index % 10)
        time.sleep(max(0.0, t_kill - now()))
        t_kill = now()
        os.kill(workers[VICTIM].pid, signal.SIGKILL)
        survivors = [i for i in range(NODES) if i != VICTIM]
        if case == "replacement":
            d.conns[NODES].send("go")
        elif case == "agent_restart":
            for i in survivors:
                d.conns[i].send("fail")
        out["kill_after_victim_return_ms"] = 1e3 * (t_kill - victim_end)
        members = survivors + ([NODES] if case == "replacement" else [])
        after = d.recv_any(members, now() + watch_s + 30)
        out["why"] = {str(i): after[i]["why"] for i in members}
        # What each node's own (sanitized) copy of the state held when it left the monitor loop:
        # a survivor not "in_round" had been expired while alive.
        out["views"] = {str(i): after[i]["view"] for i in members}
        out["survivors_expired_alive"] = sum(not after[i]["view"]["in_round"] for i in survivors)
        out["polls_after_kill"] = {str(i): [p["waiting"] for p in after[i].get("polls", []) if p["t"] >= t_kill]
                                   for i in survivors}
        if any(after[i]["why"] is None for i in members):
            out["reformed"] = False
            out["watched_ms"] = 1e3 * (now() - t_kill)
            return out
        calls2 = [after[i]["call"] for i in members]
        out["reformed"] = True
        out["reform_ms"] = 1e3 * (max(c["end"] for c in calls2) - t_kill)
        out["reform_survivors_ms"] = 1e3 * (max(after[i]["call"]["end"] for i in survivors) - t_kill)
        out["restart_after_kill_ms"] = {str(i): 1e3 * (after[i]["call"]["start"] - t_kill) for i in members}
        rnd = calls2[0]["round"]
        out["round"], out["world_after"] = rnd, sorted(c["world"] for c in calls2)
        logs2 = [after[i]["log"] for i in members]
        commit = completion_commit(logs2, rnd)
        if commit is not None:
            out["completion_after_last_join_ms"] = 1e3 * (commit - max(c["start"] for c in calls2))
            out["completed_after_kill_ms"] = 1e3 * (commit - t_kill)
        out.update(ops_summary(logs2 + logs))
        return out
    finally:
        d.stop()


def store_rtt(samples):
    d = Driver()
    try:
        d.start(store_server, "server")
        port = d.recv_any(["server"], now() + 30)["server"]["port"]
        c = TCPStore(HOST, port, None, False, STORE_TIMEOUT)
        c.set("k", "v" * 64)
        out = {"ok": True, "case": "store_rtt", "samples": samples}
        for name, op in (("get", lambda: c.get("k")), ("compare_set", lambda: c.compare_set("k", "v" * 64, "v" * 64))):
            for _ in range(100):
                op()
            ts = []
            for _ in range(samples):
                t = time.perf_counter()
                op()
                ts.append(1e6 * (time.perf_counter() - t))
            ts.sort()
            out[name + "_us"] = {"median": statistics.median(ts), "min": ts[0], "p90": ts[int(0.9 * len(ts))]}
        return out
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("case", choices=CASES)
    ap.add_argument("--run-index", type=int, default=0)
    ap.add_argument("--watch-s", type=float, default=15.0,
                    help="how long survivors watch for a re-formation after the kill")
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--keep-alive-max-attempt", type=int, default=2,
                    help="keep-alive attempts (interval 1 s) for every case but formation")
    a = ap.parse_args()
    global KEEP_ALIVE_MAX_ATTEMPT
    KEEP_ALIVE_MAX_ATTEMPT = a.keep_alive_max_attempt
    try:
        if a.case == "store_rtt":
            out = store_rtt(a.samples)
        else:
            out = run_case(a.case, a.run_index, a.watch_s)
    except Exception as e:  # noqa: BLE001 - one JSON line whatever happens
        out = {"ok": False, "case": a.case, "run_index": a.run_index, "error": f"{type(e).__name__}: {e}"}
    out["torch"] = torch.__version__
    if a.case not in ("formation", "store_rtt"):
        out["keep_alive"] = f"1 s x {KEEP_ALIVE_MAX_ATTEMPT}"
    print(json.dumps(out))
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
