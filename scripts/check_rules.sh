#!/usr/bin/env bash
# The rules of DESIGN.md that a grep can check, run as a CTest test:
#  - core/ never includes sim/ or net/ (dependencies point one way);
#  - in scenarios/, only the runner's simulator path (run/runner.cc) includes sim/: the format,
#    the workloads, the judge and the CLI see a Cluster and an Env, never a SimWorld;
#  - core/ and sim/ (tests aside) read no real time, start no OS threads, use no Boost.Fiber timed
#    waits and no <random> distributions, so a seed replays byte for byte.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}"
status=0
if hits=$(grep -rnE '#include *[<"](sim|net)/' core 2>/dev/null); then
  echo "core/ must not include sim/ or net/:"; echo "$hits"; status=1
fi
if hits=$(grep -rnE '#include *[<"](scenarios|net)/' sim 2>/dev/null); then
  echo "sim/ must not include scenarios/ or net/:"; echo "$hits"; status=1
fi
if hits=$(grep -rnE '#include *[<"]sim/' scenarios 2>/dev/null | grep -v '^scenarios/run/runner\.cc:'); then
  echo "scenarios/ includes sim/ only in run/runner.cc (workloads see a Cluster and an Env):"; echo "$hits"; status=1
fi
pattern='std::thread|this_thread::sleep|this_fiber::sleep|wait_for\(|try_lock_for|system_clock|steady_clock::now|std::rand\(|random_device|uniform_(int|real)_distribution|normal_distribution|std::mutex|std::condition_variable'
for dir in core sim; do
  [ -d "$dir" ] || continue
  if hits=$(grep -rnE "$pattern" --include='*.h' --include='*.cc' "$dir" | grep -v '_test\.cc:' | grep -vE '^\S+:[0-9]+:\s*//'); then
    echo "determinism: $dir/ must not use real time, OS threads or std distributions:"; echo "$hits"; status=1
  fi
done
[ $status -eq 0 ] && echo "rules hold"
exit $status
