#!/usr/bin/env bash
# Regenerates the `dagsim report` screenshots README links to (reports/screenshots/): the main
# job's page (scenarios/examples/elastic_training.toml, seed 42), the main job through a partition
# that cuts worker7 off for 0.8 s (the example with one fault added, as report_html_test adds it),
# and a 50-seed sweep's page (reports/screenshots/strict_check.toml, whose strict check fails on
# the seeds that kill a worker), each rendered by Debian's headless chromium as report_html_test
# renders them.
# Usage: scripts/report_screenshots.sh   (builds dagsim; installs chromium with the test deps)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
bash scripts/build.sh dagsim
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=reports/screenshots
./build/dagsim run scenarios/examples/elastic_training.toml --seed 42 --records "$work/records" >/dev/null
./build/dagsim report "$work/records" -o "$work/main_job.html" >/dev/null
cp scenarios/examples/elastic_training.toml "$work/elastic_partition.toml"
cat >>"$work/elastic_partition.toml" <<'TOML'

[[faults]]
at_ms = 10500
kind = "partition"
groups = [["worker7"], ["worker0", "worker1", "worker2", "worker4", "worker5", "worker6", "worker8"]]
heal_after_ms = 800
TOML
# Run from its folder, so the page names the file without the temporary path.
(cd "$work" && "$OLDPWD/build/dagsim" run elastic_partition.toml --seed 42 --records partition_records >/dev/null)
./build/dagsim report "$work/partition_records" -o "$work/partition.html" >/dev/null
./build/dagsim check "$out/strict_check.toml" --seeds 1..50 --json --no-progress >"$work/sweep.json" || true
./build/dagsim report "$work/sweep.json" -o "$work/sweep.html" >/dev/null
for page in main_job partition sweep; do
  timeout 120 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --user-data-dir="$work/profile" --window-size=1240,1500 --screenshot="$out/$page.png" "file://$work/$page.html" \
    2>/dev/null
  echo "$out/$page.png"
done
