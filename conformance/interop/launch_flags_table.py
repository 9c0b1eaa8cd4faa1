"""Every flag of `torchrun --help` under torchrun 1.13 and `dagsim launch`, side by side (issue 50
item 1), and a few spellings and mistakes a torchrun user brings.

The flags are read from torchrun's own --help, so a flag it lists that no case covers fails the run.
Each case runs both launchers with the same line: a base (one agent, torchrun's default static
backend on a free --master_port, --monitor_interval 0.5, -r 1 -t 1 because Debian's torchrun 1.13 on
Python 3.11 cannot parse -r 0) then the case's flags, then a worker script that writes its
environment, sys.argv and __name__. What each launcher did is summarised (exit status, workers
started, files under --log_dir) and compared:
  - both accept: the workers must have the same environment key by key (MASTER_PORT a number,
    TORCHELASTIC_ERROR_FILE in torchrun's layout, a --standalone run id random on both), the same
    sys.argv and __name__, and the same log files;
  - torchrun refuses (exit 2): dagsim must refuse too, exit 2, with no worker started and no log
    folder made, naming the option;
  - dagsim's own additions (torchrun 2.x's dashed spellings, --python) are expected to differ, and
    are marked so;
  - "torchrun broken": Debian's torchrun 1.13 on Python 3.11 fails (exit 1) where its
    Std.from_str("3") and ("0") return None (an IntFlag change in 3.11); dagsim must run the job.
Prints the table in Markdown and exits 1 naming each case that is neither.

Usage: launch_flags_table.py DAGSIM [OUT.md]   (with /usr/bin/python3, which has torch)
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

WORKER = r'''
import json, os, sys
with open(os.path.join(sys.argv[1], "worker_%s.json" % os.environ["RANK"]), "w") as f:
    json.dump({"env": dict(os.environ), "argv": sys.argv, "name": __name__}, f, sort_keys=True)
'''

TORCHRUN = ["/usr/bin/python3", "-m", "torch.distributed.run"]

# (label, flags, torchrun flag it covers or None, expected: "same", "both refuse", "dagsim only")
CASES = [
    ("--nnodes 1", ["--nnodes", "1"], "--nnodes", "same"),
    ("--nproc_per_node 2", ["--nproc_per_node", "2"], "--nproc_per_node", "same"),
    ("--rdzv_backend c10d --rdzv_endpoint localhost:P", ["--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:{port}"],
     "--rdzv_backend", "same"),
    ("--rdzv_endpoint 127.0.0.1:P (static)", ["--rdzv_endpoint", "127.0.0.1:{port}"], "--rdzv_endpoint", "same"),
    ("--rdzv_id job7", ["--rdzv_id", "job7"], "--rdzv_id", "same"),
    ("--rdzv_conf timeout=30 (static)", ["--rdzv_conf", "timeout=30"], "--rdzv_conf", "same"),
    ("--standalone", ["--standalone"], "--standalone", "same"),
    ("--max_restarts 2", ["--max_restarts", "2"], "--max_restarts", "same"),
    ("--monitor_interval 1", ["--monitor_interval", "1"], "--monitor_interval", "same"),
    ("--start_method fork", ["--start_method", "fork"], "--start_method", "same"),
    ("--start_method thread", ["--start_method", "thread"], None, "both refuse"),
    ("--role trainer", ["--role", "trainer"], "--role", "same"),
    ("-m (SCRIPT a module)", ["-m"], "-m", "same"),
    ("--module", ["--module"], "--module", "same"),
    ("--no_python (SCRIPT a program)", ["--no_python"], "--no_python", "same"),
    ("--run_path", ["--run_path"], "--run_path", "same"),
    ("--log_dir D", ["--log_dir", "{logs}"], "--log_dir", "same"),
    ("-r 2", ["-r", "2"], "-r", "same"),
    ("-r 0:2 (per local rank)", ["-r", "0:2"], None, "same"),
    ("--redirects 3", ["--redirects", "3"], None, "torchrun broken"),
    ("--redirects 2", ["--redirects", "2"], "--redirects", "same"),
    ("-t 2", ["-t", "2"], "-t", "same"),
    ("--tee 2", ["--tee", "2"], "--tee", "same"),
    ("--node_rank 0", ["--node_rank", "0"], "--node_rank", "same"),
    ("--master_addr 127.0.0.1", ["--master_addr", "127.0.0.1"], "--master_addr", "same"),
    ("--master_port P", ["--master_port", "{port}"], "--master_port", "same"),
    ("--nproc 2 (a prefix)", ["--nproc", "2"], None, "same"),
    ("--nproc_per_node=2", ["--nproc_per_node=2"], None, "same"),
    ("PET_NPROC_PER_NODE=2", [], None, "same"),
    ("--master 127.0.0.1 (ambiguous)", ["--master", "127.0.0.1"], None, "both refuse"),
    ("--local_addr 127.0.0.1 (2.x)", ["--local_addr", "127.0.0.1"], None, "both refuse"),
    ("--nproc_per_nod3 2 (a typo)", ["--nproc_per_nod3", "2"], None, "both refuse"),
    ("--nproc-per-node 2 (2.x spelling)", ["--nproc-per-node", "2"], None, "dagsim only"),
    ("--python /usr/bin/python3", ["--python", "/usr/bin/python3"], None, "dagsim only"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(launcher, name, tmp, index, label, flags):
    case_dir = os.path.join(tmp, "%02d_%s" % (index, name))
    out = os.path.join(case_dir, "out")
    logs = os.path.join(case_dir, "logs")
    os.makedirs(out)
    port = free_port()
    script = os.path.join(tmp, "worker.py")
    args = [a.format(port=port, logs=logs) for a in flags]
    if "-m" in args or "--module" in args:
        script = "worker"
    elif "--no_python" in args:
        script = os.path.join(tmp, "worker.sh")
    base = ["--master_port", str(port), "--monitor_interval", "0.5", "-r", "1", "-t", "1"]
    env = dict(os.environ, PATH="/usr/bin:" + os.environ.get("PATH", ""))
    env.pop("OMP_NUM_THREADS", None)
    if label.startswith("PET_"):
        env["PET_NPROC_PER_NODE"] = "2"
    try:
        p = subprocess.run(launcher + base + args + [script, out], cwd=tmp, env=env, capture_output=True,
                           timeout=120)
        code, text = p.returncode, (p.stdout + p.stderr).decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        code, text = "timeout", ((e.stdout or b"") + (e.stderr or b"")).decode(errors="replace")
    workers = {}
    for f in os.listdir(out):
        with open(os.path.join(out, f)) as fh:
            w = json.load(fh)
        workers[w["env"]["RANK"]] = w
    log_files = sorted(os.path.relpath(os.path.join(r, f), logs).split("/", 1)[1]
                       for r, _, fs in os.walk(logs) for f in fs) if os.path.isdir(logs) else []
    for w in workers.values():
        w["argv"] = [a.replace(out, "OUT") for a in w["argv"]]
    return {"code": code, "text": text, "workers": workers, "logs": log_files, "logs_made": os.path.isdir(logs)}


def summary(r):
    n = len(r["workers"])
    s = "exit %s, %d worker%s" % (r["code"], n, "" if n == 1 else "s")
    if r["logs"]:
        s += ", " + ", ".join(sorted(set(r["logs"])))
    if r["code"] not in (0, "timeout") and n == 0:
        m = re.search(r"(error: .*|unrecognized option.*|ambiguous option.*|invalid choice.*)", r["text"])
        if m:
            s += ": " + m.group(1)[:90]
    return s


def error_file_shape(path, run_id):
    """attempt_<n>/<local rank>/error.json when `path` is <log dir>/<run id>_<random>/that, or None."""
    m = re.fullmatch(r".*/" + re.escape(run_id or "") + r"_[^/]+/(attempt_\d+/\d+/error\.json)", path or "")
    return m and m.group(1)


def env_differences(a, b, label):
    problems = []
    if sorted(a["workers"]) != sorted(b["workers"]):
        return ["ranks %s vs %s" % (sorted(a["workers"]), sorted(b["workers"]))]
    for rank in sorted(a["workers"]):
        wa, wb = a["workers"][rank], b["workers"][rank]
        if wa["name"] != wb["name"]:
            problems.append("__name__ %r vs %r" % (wa["name"], wb["name"]))
        if wa["argv"][1:] != wb["argv"][1:] or os.path.basename(wa["argv"][0]) != os.path.basename(wb["argv"][0]):
            problems.append("argv %r vs %r" % (wa["argv"], wb["argv"]))
        ea, eb = wa["env"], wb["env"]
        for key in sorted(set(ea) | set(eb)):
            va, vb = ea.get(key), eb.get(key)
            if key == "MASTER_PORT" and (va or "").isdigit() and (vb or "").isdigit():
                continue
            shape_a = error_file_shape(va, ea.get("TORCHELASTIC_RUN_ID"))
            if key == "TORCHELASTIC_ERROR_FILE" and shape_a and shape_a == error_file_shape(vb, eb.get("TORCHELASTIC_RUN_ID")):
                continue  # <log dir>/<run id>_<random>/attempt_<n>/<local rank>/error.json on both
            if key == "TORCHELASTIC_RUN_ID" and "--standalone" in label and va and vb:
                continue  # a fresh random id on both
            if va != vb:
                problems.append("rank %s %s: %r vs %r" % (rank, key, va, vb))
    if a["logs"] != b["logs"]:
        problems.append("log files %s vs %s" % (a["logs"], b["logs"]))
    return problems


def main():
    dagsim = sys.argv[1]
    help_text = subprocess.run(TORCHRUN + ["--help"], capture_output=True, text=True).stdout
    listed = sorted(set(re.findall(r"^  (-[a-z]|--[a-z_]+)", help_text, re.M)) - {"-h", "--help"})
    covered = {c[2] for c in CASES if c[2]}
    problems = ["torchrun --help lists %s, which no case covers" % f for f in listed if f not in covered]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "worker.py"), "w") as f:
            f.write(WORKER)
        with open(os.path.join(tmp, "worker.sh"), "w") as f:
            f.write("#!/bin/sh\nexec /usr/bin/python3 %s \"$@\"\n" % os.path.join(tmp, "worker.py"))
        os.chmod(os.path.join(tmp, "worker.sh"), 0o755)
        for index, (label, flags, _, expected) in enumerate(CASES):
            theirs = run_case(TORCHRUN, "torchrun", tmp, index, label, flags)
            ours = run_case([dagsim, "launch"], "dagsim", tmp, index, label, flags)
            if expected == "same":
                found = []
                if theirs["code"] != 0 or ours["code"] != 0:
                    found.append("exit %s vs %s" % (ours["code"], theirs["code"]))
                found += env_differences(ours, theirs, label)
                verdict = "same effect" if not found else "DIFFERS: " + "; ".join(found)[:300]
            elif expected == "both refuse":
                found = []
                if theirs["code"] != 2:
                    found.append("torchrun exited %s" % theirs["code"])
                if ours["code"] != 2 or ours["workers"] or ours["logs_made"]:
                    found.append("dagsim exited %s with %d workers" % (ours["code"], len(ours["workers"])))
                verdict = "both refuse (exit 2, no worker)" if not found else "DIFFERS: " + "; ".join(found)
            elif expected == "torchrun broken":
                found = [] if ours["code"] == 0 and ours["workers"] and theirs["code"] == 1 and \
                    "'NoneType' object has no attribute 'get'" in theirs["text"] else [
                    "dagsim %s, torchrun %s" % (ours["code"], theirs["code"])]
                verdict = ("torchrun fails here (Std.from_str('3') is None on Python 3.11); dagsim runs it"
                           if not found else "DIFFERS: " + "; ".join(found))
            else:
                found = [] if ours["code"] == 0 and ours["workers"] and theirs["code"] == 2 else [
                    "dagsim %s, torchrun %s" % (ours["code"], theirs["code"])]
                verdict = "dagsim's addition (torchrun 1.13 refuses)" if not found else "DIFFERS: " + "; ".join(found)
            problems += ["%s: %s" % (label, f) for f in found]
            rows.append((label, summary(theirs), summary(ours), verdict))
            print("%-40s %s" % (label, verdict), file=sys.stderr, flush=True)
    table = ["| flags | torchrun 1.13 | dagsim launch | verdict |", "|---|---|---|---|"]
    for row in rows:
        table.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    text = "\n".join(table) + "\n"
    print(text)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text)
    for p in problems:
        print("FAIL: " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
