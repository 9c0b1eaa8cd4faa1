"""Did the job resume from the right step? A `command` check for ddp_job.py's runs (issue 51).

Compares the steps the job committed (JOB_DIR/steps.log: one line per step whose checkpoint was
written, in order, with the worker attempt that wrote it) with the reference run's (REFERENCE_DIR:
the same job without faults, `reference_run = true`), and the final parameters (final.json) with
the reference's. Exit 0 when every step of the reference was committed exactly once, in order, and
the parameters agree within float32 rounding; else exit 1, naming each step lost or repeated:

    step 7 was lost: the run went from 6 to 8 after restart 1
    step 3 was repeated: the run went back from 4 to 3 after restart 1

and the parameters' difference. Without a reference, the steps must be 0..N-1 (N from final.json
or --steps) and the parameters are not compared.

Usage: check_resume.py [JOB_DIR [REFERENCE_DIR]] [--steps N] [--atol 1e-4]
       (default: $JOB_DIR and $REFERENCE_DIR, as dagsim's command check sets them)
"""
import argparse
import json
import os
import re
import sys


def read_steps(d):
    """[(step, attempt)] from d/steps.log, in the order they were committed."""
    path = os.path.join(d, "steps.log")
    if not os.path.exists(path):
        return None
    out = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            m = re.search(r"attempt=(\d+)", line)
            out.append((int(line.split()[0]), int(m.group(1)) if m else 0))
    return out


def read_final(d):
    path = os.path.join(d, "final.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def restart_text(prev_attempt, attempt):
    if attempt == prev_attempt:
        return "within attempt %d (no restart)" % attempt
    return "after restart %d" % attempt


def span(lo, hi):
    return "step %d" % lo if lo == hi else "steps %d-%d" % (lo, hi)


def judge_steps(seq, expected):
    """Problems in the committed sequence `seq` against the expected steps 0..expected-1."""
    problems = []
    if not seq:
        return ["no step was committed (steps.log is empty)"]
    first, a0 = seq[0]
    if first != 0:
        problems.append("%s %s lost: the run started at step %d (attempt %d)" % (
            span(0, first - 1), "was" if first == 1 else "were", first, a0))
    for (prev, pa), (step, a) in zip(seq, seq[1:]):
        if step == prev + 1:
            continue
        if step > prev + 1:
            problems.append("%s %s lost: the run went from %d to %d %s" % (
                span(prev + 1, step - 1), "was" if step - prev == 2 else "were", prev, step, restart_text(pa, a)))
        else:
            problems.append("%s %s repeated: the run went back from %d to %d %s" % (
                span(step, prev), "was" if step == prev else "were", prev, step, restart_text(pa, a)))
    last, la = seq[-1]
    if last < expected - 1:
        problems.append("%s never ran: the last committed step was %d (attempt %d)" % (
            span(last + 1, expected - 1), last, la))
    elif last > expected - 1:
        problems.append("%s ran beyond the reference's last step %d" % (span(expected, last), expected - 1))
    return problems


def param_difference(params, ref):
    if len(params) != len(ref) or any(len(p) != len(r) for p, r in zip(params, ref)):
        return None, 0
    worst, n = 0.0, 0
    for p, r in zip(params, ref):
        for a, b in zip(p, r):
            worst = max(worst, abs(a - b))
            n += 1
    return worst, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("job_dir", nargs="?", default=os.environ.get("JOB_DIR"))
    ap.add_argument("reference_dir", nargs="?", default=os.environ.get("REFERENCE_DIR"))
    ap.add_argument("--steps", type=int, help="the expected step count without a reference")
    ap.add_argument("--atol", type=float, default=1e-4, help="largest parameter difference taken for rounding")
    args = ap.parse_args()
    if not args.job_dir:
        sys.exit("check_resume.py: no JOB_DIR (argument or environment)")

    problems = []
    seq = read_steps(args.job_dir)
    final = read_final(args.job_dir)
    ref_seq = read_steps(args.reference_dir) if args.reference_dir else None
    ref_final = read_final(args.reference_dir) if args.reference_dir else None
    if args.reference_dir and (ref_seq is None or ref_final is None):
        print("FAIL: the reference run left no %s in %s: it did not finish" % (
            "steps.log" if ref_seq is None else "final.json", args.reference_dir))
        return 1

    if ref_seq is not None:
        ref_steps = [s for s, _ in ref_seq]
        if ref_steps != list(range(len(ref_steps))):
            print("FAIL: the reference run's own steps are not 0..%d in order: %s" % (len(ref_steps) - 1, ref_steps))
            return 1
        expected = len(ref_steps)
    elif args.steps is not None:
        expected = args.steps
    elif final is not None:
        expected = final["steps"]
    else:
        expected = None

    if seq is None:
        problems.append("the job left no steps.log in %s: no step was committed" % args.job_dir)
    elif expected is not None:
        problems.extend(judge_steps(seq, expected))
    if final is None:
        problems.append("the job wrote no final.json: it did not finish")

    detail = ""
    if final is not None and ref_final is not None:
        worst, n = param_difference(final["params"], ref_final["params"])
        if worst is None:
            problems.append("the final parameters have another shape than the reference's")
        else:
            detail = "parameters: largest difference from the reference run's %.3g over %d values " \
                     "(tolerance %.3g); digest %s, the reference's %s" % (worst, n, args.atol, final["digest"],
                                                                         ref_final["digest"])
            if worst > args.atol:
                problems.append("the final parameters differ from the reference run's: " + detail)
                detail = ""

    attempts = sorted({a for _, a in seq or []})
    if problems:
        for p in problems:
            print(p)
        if detail:
            print(detail)
        return 1
    restarts = [s for (s, a), (_, pa) in zip(seq[1:], seq) if a != pa]
    print("PASS: steps 0-%d committed once each, in order, by %d worker attempt(s)%s%s" % (
        expected - 1, len(attempts),
        (" (resumed at step %s)" % ", ".join(map(str, restarts))) if restarts else "",
        ("; " + detail) if detail else "; no reference run to compare the parameters with"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
