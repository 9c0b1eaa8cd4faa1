#!/usr/bin/env bash
# Installs the built dagsim into a temporary prefix, builds cmake/consumer against it with
# find_package(dagsim), and runs both of its programs (run_scenario on an example scenario, twice
# with one seed); then runs the installed bin/dagsim on the example. Nothing of dagsim is rebuilt.
# Usage: check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/cmake/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
"$work/build/run_scenario" "$source_dir/scenarios/examples/seed_example.toml" 1
# The installed command runs a scenario on its own (it needs nothing from the build tree).
"$work/prefix/bin/dagsim" --version
# Its shell completion is where bash-completion and zsh look for it.
test -f "$work/prefix/share/bash-completion/completions/dagsim"
test -f "$work/prefix/share/zsh/site-functions/_dagsim"
"$work/prefix/bin/dagsim" run "$source_dir/scenarios/examples/seed_example.toml" --seed 1 >/dev/null
