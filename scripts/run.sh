#!/usr/bin/env bash
# Quick start, command 1: set everything up, build, and run the main job.
# The main job: `dagsim run` on the elastic training example, seed 42: both halves of the mission
# at once. Eight agents rendezvous, their worker groups train a partitioned model with distributed
# autograd and the DistributedOptimizer through two deaths and a late join, and the final
# parameters are checked against local training; the report tells it round by round. Extra
# arguments go to `dagsim run` (e.g. --json, --trace trace.json, --transport tcp).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh dagsim  # only what the main job needs; scripts/test.sh builds the rest
./build/dagsim run scenarios/examples/elastic_training.toml --seed 42 "$@"
