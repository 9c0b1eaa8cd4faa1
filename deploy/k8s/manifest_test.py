#!/usr/bin/env python3
"""deploy/k8s/check-sweep-indexed-job.yaml parses as YAML and says one sweep: an Indexed Job whose
completions equal the --shard N its pods run, results written to the volume the merge reads, and a
merge of that many shards. Exit 0 passed, 1 failed, 77 skipped (no python3-yaml)."""
import os
import re
import sys

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed")
    sys.exit(77)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-sweep-indexed-job.yaml")
with open(path) as f:
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(f)}
sweep, merge = docs["dagsim-check-sweep"], docs["dagsim-check-merge"]
problems = []
spec = sweep["spec"]
if spec.get("completionMode") != "Indexed":
    problems.append("the sweep is not an Indexed Job (JOB_COMPLETION_INDEX would not be set)")
shard_args = " ".join(spec["template"]["spec"]["containers"][0]["args"])
shards = re.search(r"--shard (\d+)\b", shard_args)
if not shards or int(shards.group(1)) != spec["completions"]:
    problems.append(f"--shard N must be the completions ({spec['completions']}): {shard_args}")
if "--results /results/" not in shard_args:
    problems.append("the shards do not write their results to the shared volume")
merge_args = " ".join(merge["spec"]["template"]["spec"]["containers"][0]["args"])
if "dagsim merge /results/shard-" not in merge_args or f"-ge {spec['completions']}" not in merge_args:
    problems.append(f"the merge does not wait for and merge {spec['completions']} shards: {merge_args}")
for p in problems:
    print(f"FAIL: {p}")
print("PASS" if not problems else "")
sys.exit(1 if problems else 0)
