#!/usr/bin/env bash
# Verdicts under load: runs the TCP conformance tests (CTest label `tcp`: every suite that starts
# node processes or speaks TCP, and the interop tests) N times in a row while two busy loops hold
# both cores, as CI's busy 2-core machine may. A test whose verdict depends on load fails here.
#
# Usage: scripts/load_check.sh [N]     (default 50; JOBS tests at once, default 4; LABEL, default
#                                       tcp; BUILD_DIR, default build, brought up to date first)
# Prints one line per round and, at the end, each test that failed with the rounds it failed in;
# each failed round's log is kept as load-check/round_N.log. Exit 0 only when every round passed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-50}
jobs=${JOBS:-4}
label=${LABEL:-tcp}
build=${BUILD_DIR:-build}
# Build what changed with the folder's own configuration (scripts/build.sh would reconfigure a
# folder configured with other options, DAGSIM_WERROR among them, and rebuild everything).
if [ -f "$build/CMakeCache.txt" ]; then
  cmake --build "$build" -j "$(nproc)"
else
  bash scripts/build.sh
fi
out=$(pwd)/load-check
mkdir -p "$out"
rm -f "$out"/round_*.log "$out/failed"

busy=()
stop_busy() { [ ${#busy[@]} -eq 0 ] || kill -9 "${busy[@]}" 2>/dev/null || true; }
trap stop_busy EXIT
for _ in 1 2; do
  (while :; do :; done) &
  busy+=($!)
done

passed=0
for round in $(seq 1 "$rounds"); do
  started=$SECONDS
  if (cd "$build" && ctest -L "$label" -j "$jobs" --timeout 600 --output-on-failure) >"$out/round.log" 2>&1; then
    passed=$((passed + 1))
    verdict=passed
  else
    verdict=FAILED
    cp "$out/round.log" "$out/round_$round.log"
    sed "s/^/$round /" "$build/Testing/Temporary/LastTestsFailed.log" >>"$out/failed"
  fi
  echo "round $round: $verdict in $((SECONDS - started)) s; $(grep -E 'tests passed' "$out/round.log" | tail -1)"
done
echo "$passed/$rounds rounds passed under two busy loops (ctest -L $label -j $jobs)"
if [ -s "$out/failed" ]; then
  echo "failed tests, with their rounds:"
  awk '{ round = $1; $1 = ""; sub(/^ [0-9]+:/, ""); r[$0] = r[$0] " " round } END { for (n in r) print "  " n ":" r[n] }' \
    "$out/failed" | sort
fi
[ "$passed" -eq "$rounds" ]
