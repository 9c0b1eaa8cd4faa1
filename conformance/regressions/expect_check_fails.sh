#!/bin/bash
# The regression corpus's proof that it can fail: runs `dagsim run FILE --seed SEED` (with the
# planted bug the test sets in DAGSIM_PLANTED_BUG) and passes only when the run exits 1 (a check
# failed) and the named check is among the failed ones, with MATCH (an extended regex) in its
# line when given. Anything else (a pass, another check failing, exit 2 or 3) fails the test,
# printing the run's report.
# Usage: expect_check_fails.sh DAGSIM FILE SEED CHECK [MATCH]
set -u
dagsim=$1 file=$2 seed=$3 check=$4 match=${5:-}
out=$("$dagsim" run "$file" --seed "$seed" 2>&1)
rc=$?
if [ "$rc" -ne 1 ]; then
  printf '%s\n' "$out"
  echo "expected exit 1 (a check failed) under DAGSIM_PLANTED_BUG=${DAGSIM_PLANTED_BUG:-}, got $rc"
  exit 1
fi
line=$(grep -E "^  FAIL $check: " <<<"$out")
if [ -z "$line" ]; then
  printf '%s\n' "$out"
  echo "expected check $check to fail"
  exit 1
fi
if [ -n "$match" ] && ! grep -Eq -- "$match" <<<"$line"; then
  printf '%s\n' "$out"
  echo "check $check failed, but not with /$match/"
  exit 1
fi
echo "caught: $line"
