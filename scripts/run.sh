#!/usr/bin/env bash
# Quick start, command 1: set everything up, build, and run the main job.
# Until the simulator's `dagsim run` lands, the main job is the local autograd example (the seed
# example's program on the local engine), which prints its gradients.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
./build/scenarios/local_autograd_example "$@"
