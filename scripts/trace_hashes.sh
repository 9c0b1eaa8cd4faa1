#!/usr/bin/env bash
# Prints "example seed trace_hash" for every simulated example (scenarios/examples/*.toml) over
# seeds 1..N, so a change that must not move the simulator's event order can be checked against
# the lines from the commit before it (issue 53: "every example's trace hash is stable"):
#   scripts/trace_hashes.sh > before.txt; (change, rebuild); scripts/trace_hashes.sh | diff before.txt -
# DAGSIM_CPU_CAPABILITY=scalar|avx2|avx512 in the environment checks another kernel path.
# Usage: scripts/trace_hashes.sh [DAGSIM_BINARY] [SEEDS]   (defaults: build/dagsim, 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dagsim=${1:-$root/build/dagsim}
seeds=${2:-3}
cd "$root"
for f in scenarios/examples/*.toml; do
  for ((s = 1; s <= seeds; s++)); do
    hash=$("$dagsim" run "$f" --seed "$s" --json 2>/dev/null | sed -n 's/^  "trace_hash": "\(0x[0-9a-f]*\)",\{0,1\}$/\1/p' || true)
    echo "$(basename "$f") $s ${hash:-ERROR}"
  done
done
