#!/usr/bin/env python3
"""A `dagsim check` sweep as a Slurm job array (issue 52 item 6), merged, equals the unsharded one.

Goal: a sweep split over a real scheduler's tasks reports what one `dagsim check` on one machine
reports. Method: a one-host Slurm cluster from Debian's slurm-wlm in this test's own folder, the
same Cluster that srun_launch.py starts (shared/reference/slurm-single-host.md), then one

    sbatch --array=0-3 --wait  check_array.sbatch

whose every task runs `dagsim check FILE --seeds 1..20 --shard 4 --results DIR/shard-%i.json
--probes` for two scenarios: a fast example (every seed passes) and the same example shortened with
a check that some seeds fail. The shard's index comes from SLURM_ARRAY_TASK_ID alone. Then
`dagsim merge` of the four shards, against the unsharded `dagsim check --seeds 1..20 --json
--probes`: the same exit code, seeds, verdicts, failing seeds and replay lines, and probe table
(the JSON equal but for the seeds' wall times), and the JUnit files equal but for their times.

Everything this test starts it stops by pid (Cluster.stop and stop_descendants, as srun_launch.py);
a SIGTERM or SIGINT (CTest's timeout, ^C) runs the same cleanup before the test exits.

Exit status: 0 passed, 1 failed, 77 skipped (not root, or slurm-wlm/munge not installed).
Usage: check_array.py DAGSIM_BINARY
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srun_launch import Cluster, Failed, log, preflight, report_failure, tail, tear_down  # noqa: E402

SHARDS = 4
SEEDS = "1..20"
EXAMPLE = "heartbeat_chaos.toml"


def mixed_scenario(example_text):
    """The example, shortened, with a check some seeds fail: worker3 never declared dead."""
    text = example_text.replace("duration_ms = 60000", "duration_ms = 4000")
    if text == example_text:
        raise Failed(f"{EXAMPLE} no longer has duration_ms = 60000; update this test's scenario")
    return text + '\n[[checks]]\nkind = "never_declared_dead"\nnodes = ["worker3"]\n'


SBATCH = """#!/bin/sh
#SBATCH --job-name=dagsim-check-array
#SBATCH --time=10
# One shard of each sweep per array task: the index from SLURM_ARRAY_TASK_ID (dagsim check --shard N).
set -u
status=0
for name in {names}; do
  "{dagsim}" check "{root}/$name.toml" --seeds {seeds} --shard {shards} --jobs 1 --no-progress --probes \\
      --results "{root}/results/$name/shard-%i.json" || status=$((status > $? ? status : $?))
done
# 0 or 1 is a verdict; anything else is a task that could not run its shard.
[ $status -le 1 ]
"""


def without_times(summary):
    for seed in summary.get("results", []):
        seed.pop("seconds", None)
    return summary


def run(command, env, timeout=600):
    r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return r


def compare(name, root, dagsim, env):
    scenario = os.path.join(root, f"{name}.toml")
    shards = sorted(os.path.join(root, "results", name, f) for f in os.listdir(os.path.join(root, "results", name))
                    if f.endswith(".json"))
    if len(shards) != SHARDS:
        raise Failed(f"{name}: {len(shards)} shard results, expected {SHARDS}: {shards}")
    whole = run([dagsim, "check", scenario, "--seeds", SEEDS, "--jobs", "2", "--no-progress", "--probes", "--json",
                 "--junit", os.path.join(root, f"{name}-whole.xml")], env)
    merged = run([dagsim, "merge", *shards, "--probes", "--json", "--junit", os.path.join(root, f"{name}-merged.xml")], env)
    whole_text = run([dagsim, "check", scenario, "--seeds", SEEDS, "--jobs", "2", "--no-progress"], env)
    merged_text = run([dagsim, "merge", *shards], env)
    problems = []
    if whole.returncode not in (0, 1) or merged.returncode != whole.returncode:
        problems.append(f"{name}: exit {whole.returncode} unsharded, {merged.returncode} merged\n{whole.stderr}{merged.stderr}")
    try:
        a, b = without_times(json.loads(whole.stdout)), without_times(json.loads(merged.stdout))
    except json.JSONDecodeError as e:
        raise Failed(f"{name}: not JSON ({e}):\n{whole.stdout[:2000]}\n---\n{merged.stdout[:2000]}")
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            problems.append(f"{name}: {key} differs:\n  unsharded {json.dumps(a.get(key))[:1500]}\n  merged    "
                            f"{json.dumps(b.get(key))[:1500]}")
    strip = lambda xml: re.sub(r' (time|timestamp)="[^"]*"', "", xml)  # noqa: E731
    with open(os.path.join(root, f"{name}-whole.xml")) as f, open(os.path.join(root, f"{name}-merged.xml")) as g:
        if strip(f.read()) != strip(g.read()):
            problems.append(f"{name}: the JUnit files differ beyond their times")
    lines = lambda text: [l for l in text.splitlines() if l.startswith(("seed ", "  replay: ")) or "seeds passed" in l]  # noqa
    if lines(whole_text.stdout) != lines(merged_text.stdout):
        problems.append(f"{name}: failing-seed lines differ:\n{whole_text.stdout}\n---\n{merged_text.stdout}")
    if problems:
        raise Failed("\n".join(problems))
    failing = [s["seed"] for s in a["failed"]]
    log(f"{name}: merged {SHARDS} shards equal the unsharded check: {a['passed']}/{a['runs']} passed, failing seeds "
        f"{failing}, {len(a['probes'])} probes hit, {len(a['probes_never_hit'])} never")
    return a


def run_array(cluster, dagsim, examples):
    root = cluster.path("sweep")
    os.makedirs(os.path.join(root, "logs"))
    with open(os.path.join(examples, EXAMPLE)) as f:
        example = f.read()
    names = ["example", "mixed"]
    with open(os.path.join(root, "example.toml"), "w") as f:
        f.write(example)
    with open(os.path.join(root, "mixed.toml"), "w") as f:
        f.write(mixed_scenario(example))
    for name in names:
        os.makedirs(os.path.join(root, "results", name))
    script = os.path.join(root, "check_array.sbatch")
    with open(script, "w") as f:
        f.write(SBATCH.format(names=" ".join(names), dagsim=dagsim, root=root, seeds=SEEDS, shards=SHARDS))
    env = dict(cluster.env, TMPDIR=cluster.path("tmp"))
    os.makedirs(env["TMPDIR"])
    command = ["sbatch", f"--array=0-{SHARDS - 1}", "--wait", f"--chdir={root}",
               f"--output={root}/logs/task-%a.out", f"--error={root}/logs/task-%a.err", script]
    log("running " + " ".join(command))
    started = time.monotonic()
    try:
        r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=420)
    except subprocess.TimeoutExpired:
        raise Failed("sbatch --wait did not return within 420 s")
    log(f"sbatch --wait exited with {r.returncode} after {time.monotonic() - started:.1f} s: {r.stdout.strip()} {r.stderr.strip()}")
    for task in range(SHARDS):
        for kind in ("out", "err"):
            path = os.path.join(root, "logs", f"task-{task}.{kind}")
            if os.path.exists(path) and os.path.getsize(path) > 0:
                print(f"--- task {task}'s std{kind} (last lines) ---\n{tail(path, 12)}", end="", flush=True)
    if r.returncode != 0:
        raise Failed(f"sbatch --array=0-{SHARDS - 1} --wait exited with {r.returncode}")
    for name in names:
        for index in range(SHARDS):
            with open(os.path.join(root, "results", name, f"shard-{index}.json")) as f:
                shard = json.load(f)
            if shard["shard"] != {"index": index, "count": SHARDS, "source": "SLURM_ARRAY_TASK_ID"}:
                raise Failed(f"{name}: shard-{index}.json says shard {shard['shard']}")
    passing = compare("example", root, dagsim, env)
    mixed = compare("mixed", root, dagsim, env)
    if passing["failed"]:
        raise Failed(f"{EXAMPLE}: seeds {[s['seed'] for s in passing['failed']]} failed; the example should pass")
    if not mixed["failed"] or len(mixed["failed"]) == mixed["runs"]:
        raise Failed(f"the mixed sweep should fail some seeds but not all: {len(mixed['failed'])} of {mixed['runs']}")


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    dagsim = os.path.abspath(sys.argv[1])
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scenarios", "examples")
    refused = preflight(("sbatch",))
    if refused is not None:
        return refused

    # A timeout's SIGTERM (or ^C) ends the test through the cleanup below, not around it.
    def stop(signum, _frame):
        raise Failed(f"stopped by signal {signum}")

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    root = tempfile.mkdtemp(prefix="dagsim-slurm-array-")
    cluster = Cluster(root)
    code = 0
    started = time.monotonic()
    try:
        # The binary every task and the comparison run: a copy of its own, so a rebuild of the
        # original while the array runs cannot hand the shards and the unsharded check two builds.
        os.makedirs(cluster.path("bin"))
        dagsim = shutil.copy2(dagsim, cluster.path("bin", "dagsim"))
        host = cluster.start()
        log(f"slurmctld and slurmd up on {host}, in {root}")
        run_array(cluster, dagsim, examples)
    except (Failed, OSError, subprocess.SubprocessError, KeyError, ValueError) as e:
        report_failure(cluster, e)
        code = 1
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # the cleanup runs to its end
        if not tear_down(cluster, root):
            code = 1
    if code == 0:
        log(f"PASS in {time.monotonic() - started:.1f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
