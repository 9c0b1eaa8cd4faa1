"""docs/jobs.md ("Test your own job") run as written (issue 51): every fenced block marked
`file=NAME` is written where the page's commands stand at that point, and every block marked
`sh run` is run, in the page's order, in one bash (`set -e`: any command that fails fails the
test) in a fresh empty folder, with DAGSIM's folder first on PATH. Then the files the page says it
makes must be there: out.xml (a JUnit file with ten seeds), sweep.html, run1.html.

Usage: docs_jobs_test.py DAGSIM DOCS_JOBS_MD   (exit 0 pass, 1 fail naming the block, 77 without torch)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\S*)\s*(.*)$")


def blocks(text):
    """[(kind, name, body, line)]: kind 'file' (name = the file) or 'run'."""
    out, cur = [], None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if cur is None and m and line != "```":
            attrs = m.group(2).split()
            name = next((a[5:] for a in attrs if a.startswith("file=")), None)
            kind = "file" if name else ("run" if m.group(1) == "sh" and "run" in attrs else None)
            cur = {"kind": kind, "name": name, "lines": [], "line": n}
        elif cur is not None and line.startswith("```"):
            if cur["kind"]:
                out.append((cur["kind"], cur["name"], "\n".join(cur["lines"]) + "\n", cur["line"]))
            cur = None
        elif cur is not None:
            cur["lines"].append(line)
    return out


def script_of(bs, md):
    parts = ["set -e", "set -x" ]
    for kind, name, body, line in bs:
        parts.append(": '--- %s:%d (%s) ---'" % (os.path.basename(md), line, kind if kind == "run" else "file " + name))
        if kind == "file":
            assert "DAGSIM_DOCS_EOF" not in body
            parts.append("cat > %s <<'DAGSIM_DOCS_EOF'\n%sDAGSIM_DOCS_EOF" % (name, body))
        else:
            parts.append(body)
    return "\n".join(parts) + "\n"


def main():
    dagsim, md = os.path.abspath(sys.argv[1]), sys.argv[2]
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIP: no torch for /usr/bin/python3")
        return 77
    with open(md) as f:
        bs = blocks(f.read())
    runs = [b for b in bs if b[0] == "run"]
    files = [b for b in bs if b[0] == "file"]
    if len(runs) < 5 or len(files) < 3:
        print("FAIL: %s has %d `sh run` blocks and %d `file=` blocks: has the marking changed?" % (md, len(runs), len(files)))
        return 1
    tmp = tempfile.mkdtemp(prefix="dagsim-docs-jobs-")
    try:
        script = os.path.join(tmp, "docs_jobs.sh")
        with open(script, "w") as f:
            f.write(script_of(bs, md))
        # TMPDIR: the folders of the runs the page makes without --records go under tmp, removed after.
        env = dict(os.environ, PATH=os.path.dirname(dagsim) + os.pathsep + os.environ.get("PATH", ""), TMPDIR=tmp)
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        r = subprocess.run(["bash", script], cwd=work, env=env)
        if r.returncode != 0:
            print("FAIL: docs/jobs.md's commands stopped with exit %d (the last `: '--- ...'` line above names the block)"
                  % r.returncode)
            return 1
        job = os.path.join(work, "myjob")
        missing = [n for n in ("out.xml", "sweep.html", "run1.html") if not os.path.isfile(os.path.join(job, n))]
        if missing:
            print("FAIL: the page's commands did not make %s" % ", ".join(missing))
            return 1
        with open(os.path.join(job, "out.xml")) as f:
            junit = f.read()
        seeds = set(re.findall(r"seed[ =\"']*(\d+)", junit))
        if len(seeds) < 10:
            print("FAIL: out.xml names %d seeds, not 10: %s" % (len(seeds), sorted(seeds)))
            return 1
        print("PASS: docs/jobs.md's %d command blocks ran as written (%d files written)" % (len(runs), len(files)))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
