#!/bin/bash
# One example job scenario (scenarios/examples/jobs/) run as a user runs it (issue 51):
#   run_example.sh DAGSIM FILE               `dagsim run FILE --seed 1` must pass (exit 0)
#   run_example.sh DAGSIM FILE fail REGEX    it must fail (exit 1), and its output match REGEX
#                                            (the planted resume bug: the lost step named)
# Exit 77 (skipped) without torch for /usr/bin/python3, or for a scenario with namespaces = true
# when not root (a partition needs each agent in a network namespace of its own).
#   run_example.sh DAGSIM FILE pass "" all  only under DAGSIM_JOB_EXAMPLES=all (skipped otherwise)
set -u
dagsim=$1 file=$2 expect=${3:-pass} regex=${4:-} tier=${5:-default}
if [ "$tier" = all ] && [ "${DAGSIM_JOB_EXAMPLES:-}" != all ]; then
  echo "SKIP: $file runs under DAGSIM_JOB_EXAMPLES=all (the default suite runs one launcher per fault)"; exit 77
fi
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "SKIP: no torch for /usr/bin/python3"; exit 77
fi
if grep -q '^namespaces *= *true' "$file" && [ "$(id -u)" != 0 ]; then
  echo "SKIP: $file needs network namespaces (root)"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out.txt
# The run's folder (agents' logs, the store's record, the job's files) goes under $tmp, removed after.
"$dagsim" run "$file" --seed 1 --records "$tmp/run" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$expect" = pass ]; then
  [ $rc = 0 ] && { echo "PASS: $file"; exit 0; }
  echo "FAIL: dagsim run $file --seed 1 exited $rc, expected 0"; exit 1
fi
if [ $rc != 1 ]; then
  echo "FAIL: dagsim run $file --seed 1 exited $rc, expected 1 (a check failed)"; exit 1
fi
if ! grep -Eq "$regex" "$out"; then
  echo "FAIL: $file failed, but its output does not match /$regex/"; exit 1
fi
echo "PASS: $file fails as planted: $(grep -Eo "$regex" "$out" | head -1)"
