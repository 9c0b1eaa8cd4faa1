"""Issue 24 item 6 in CI: PyTorch's elastic stack judged from the store's side.

  replay DAGSIM REPO   every record kept under reports/pytorch_elastic/ is judged again
                       (`dagsim judge --json`) and must give exactly the violations
                       reports/pytorch_elastic.json states for that run: the report's claims are
                       replayable, and a change to the checker that alters one shows here.
  jobs DAGSIM          runs the formation and kill cases of the elastic job scenarios
                       (scenarios/examples/jobs/elastic/, by scripts/pytorch_elastic_jobs.py), torchrun
                       and dagsim launch, on this host: torchrun's kill breaks L6 (PyTorch #111646:
                       the survivors never re-form) and neither of its runs breaks a safety rule
                       (S1-S10); dagsim launch passes both and re-forms after the kill. torchrun's
                       timing (liveness) is PyTorch's and varies with the machine's load, so it is
                       reported, not asserted. Needs torch (77 without).
Exit 0 on success, 1 naming what differs.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def replay(dagsim, repo):
    base = os.path.join(repo, "reports", "pytorch_elastic")
    with open(os.path.join(repo, "reports", "pytorch_elastic.json")) as f:
        results = json.load(f)["results"]
    dirs = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
    if not dirs:
        sys.exit("FAIL: no records under %s" % base)
    bad = []
    for d in dirs:
        case, system, run = d.rsplit(".", 2)
        stated = [r for r in results if r["case"] == case and r["system"] == system and r["run"] == int(run)]
        if len(stated) != 1:
            bad.append("%s: the report states no such run" % d)
            continue
        judged = subprocess.run([dagsim, "judge", os.path.join(base, d), "--json"], capture_output=True, text=True)
        if judged.returncode not in (0, 1):
            bad.append("%s: dagsim judge exited %d: %s" % (d, judged.returncode, judged.stderr.strip()))
            continue
        got = json.loads(judged.stdout)["violations"]
        if got != stated[0]["violations"]:
            bad.append("%s: judged %s, the report states %s" % (d, got, stated[0]["violations"]))
        else:
            print("%s: %d violation(s) as stated" % (d, len(got)))
    if bad:
        sys.exit("FAIL:\n" + "\n".join(bad))
    print("PASS: %d records replay as reported" % len(dirs))


def matrix(dagsim):
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIP: no torch for /usr/bin/python3")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "pytorch_elastic_jobs.py"), dagsim, out,
                        "--cases", "formation,kill"], check=True)
        with open(os.path.join(out, "matrix.json")) as f:
            results = {(r["case"], r["system"]): r for r in json.load(f)["results"]}
    bad = []
    for key, r in sorted(results.items()):
        if "error" in r:
            bad.append("%s: the judge failed: %s" % (key, r["error"]))
    if bad:
        sys.exit("FAIL:\n" + "\n".join(bad))
    for case in ("formation", "kill"):
        r = results[(case, "torchrun")]
        print("torchrun %s: %s" % (case, r["violations"] or "no violation"))
        safety = [v for v in r["violations"] if v.startswith("S")]
        if safety:
            bad.append("torchrun's %s broke a safety rule: %s" % (case, safety))
    if not any(v.startswith("L6") for v in results[("kill", "torchrun")]["violations"]):
        bad.append("torchrun's kill: no L6 (the survivors were expected not to re-form): %s" %
                   results[("kill", "torchrun")]["violations"])
    for key in (("formation", "dagsim"), ("kill", "dagsim")):
        if not results[key]["passed"]:
            bad.append("%s: %s" % (key, results[key]["violations"]))
    reform = results[("kill", "dagsim")]["reformations"]
    if not reform or "reformed_after_ms" not in reform[0]:
        bad.append("dagsim launch did not re-form after the kill: %s" % reform)
    if bad:
        sys.exit("FAIL:\n" + "\n".join(bad))
    print("PASS: torchrun breaks L6 after a kill and no safety rule; dagsim launch re-forms in %.0f ms" %
          reform[0]["reformed_after_ms"])


if __name__ == "__main__":
    if sys.argv[1] == "replay":
        replay(sys.argv[2], sys.argv[3])
    else:
        matrix(sys.argv[2])
