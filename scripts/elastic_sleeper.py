"""A worker that does nothing but live until a deadline, so a restarted group ends when the job
does and the agents' rendezvous is all there is to see. No torch import: eight agents' workers cost
no CPU. Used by the elastic job scenarios (scenarios/examples/jobs/elastic/, the source of
reports/pytorch_elastic.md).

Usage: elastic_sleeper.py DEADLINE            (Unix seconds)
       elastic_sleeper.py --job-seconds N     (N seconds after the first worker of the run started:
                                              the first one writes $DAGSIM_JOB_DIR/deadline, every
                                              later one, restarted or late, reads it)
"""
import os
import sys
import time


def job_deadline(seconds):
    path = os.path.join(os.environ.get("DAGSIM_JOB_DIR", "."), "deadline")
    tmp = "%s.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%.3f\n" % (time.time() + seconds))
    try:
        os.link(tmp, path)  # atomic: the first worker's deadline stands
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    with open(path) as f:
        return float(f.read())


if sys.argv[1] == "--job-seconds":
    deadline = job_deadline(float(sys.argv[2]))
else:
    deadline = float(sys.argv[1])
while time.time() < deadline:
    time.sleep(min(0.2, max(0.0, deadline - time.time())))
