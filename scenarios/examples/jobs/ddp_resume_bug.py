"""ddp_job.py with a planted resume bug (issue 51, "a job that is wrong is caught"): on a restart it
loads the checkpoint of step N but resumes at step N + 2, so step N + 1 never runs. A fault-free run
never resumes and is correct; a run through any fault that restarts the workers loses a step, and
check_resume.py (a `command` check with a reference run) names it:
    step 7 was lost: the run went from 6 to 8 after restart 1

Usage: the same as ddp_job.py.
"""
import os

import ddp_job


def resume_step_wrong(state):
    # BUG (planted): an off-by-one on resume, "the checkpoint is of the step before the last one".
    return state["step"] + 2


if __name__ == "__main__":
    args = ddp_job.parse()
    os.makedirs(args.dir, exist_ok=True)
    ddp_job.train(args.dir, args.steps, args.step_seconds, args.timeout_seconds, resume=resume_step_wrong)
