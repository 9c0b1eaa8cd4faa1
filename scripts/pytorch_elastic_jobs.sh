#!/bin/bash
# Regenerates reports/pytorch_elastic.md (and reports/pytorch_elastic.json, reports/pytorch_elastic/)
# from the elastic job scenarios, in one command (issue 51): every scenarios/examples/jobs/elastic/
# CASE.{torchrun,dagsim}.toml run by `dagsim run FILE --seed 1 --records ...` (alternating the
# launchers), then scripts/pytorch_elastic_report.py. About 15 minutes per run of the seven cases
# on 2 cores; run it on a quiet machine (the agents' timing is real).
#
# Usage: scripts/pytorch_elastic_jobs.sh [--runs K] [--cases a,b] [--out DIR] [--dagsim PATH]
#   --runs K      runs of each case and launcher (default 2)
#   --cases a,b   only these cases (formation,kill,pause,late_join,store_pause,kill_then_join,kill_8)
#   --out DIR     where the runs' folders and matrix.json go (default: a fresh folder under /tmp)
#   --dagsim PATH the binary (default: build/dagsim)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=2 cases="" out="" dagsim="$root/build/dagsim"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --dagsim) dagsim=$2; shift 2 ;;
    *) echo "usage: $0 [--runs K] [--cases a,b] [--out DIR] [--dagsim PATH]" >&2; exit 2 ;;
  esac
done
[ -x "$dagsim" ] || { echo "$0: no dagsim at $dagsim (build it, or give --dagsim)" >&2; exit 2; }
/usr/bin/python3 -c "import torch" || { echo "$0: /usr/bin/python3 has no torch" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/pytorch-elastic-jobs-XXXXXX)
echo "runs under $out" >&2
/usr/bin/python3 "$root/scripts/pytorch_elastic_jobs.py" "$dagsim" "$out" --runs "$runs" ${cases:+--cases "$cases"}
/usr/bin/python3 "$root/scripts/pytorch_elastic_report.py" "$out" "$root"
