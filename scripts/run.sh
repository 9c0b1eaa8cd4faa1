#!/usr/bin/env bash
# Quick start, command 1: set everything up, build, and run the main job.
# The main job: `dagsim run` on the example that shows every kind of fault (kill, crash, pause,
# partitions) and the failure detector's checks, seed 42. Extra arguments go to `dagsim run`
# (e.g. --json, --trace trace.json).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/dagsim run scenarios/examples/heartbeat_faults.toml --seed 42 "$@"
