#!/usr/bin/env bash
# The rules of DESIGN.md that a grep can check, run as a CTest test:
#  - no folder includes one above it (core < sim, net < launch < scenarios; DESIGN.md's arrows point
#    down only), and core/runtime (the seam) never includes core/fibers (its implementations);
#  - in scenarios/, only the runner's simulator path (run/runner.cc) includes sim/: the format,
#    the workloads, the judge and the CLI see a Cluster and an Env, never a SimWorld;
#  - compute/kernels/ sees no Tensor, autograd or runtime; core/ never includes a compute/device/ backend;
#  - core/, compute/ and sim/ (tests aside) read no real time, start no OS threads, use no Boost.Fiber timed
#    waits and no <random> distributions, so a seed replays byte for byte;
#  - the Prng's continuous draws call no libm function.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}"
status=0
# The layers, lowest first: core; sim and net (side by side); launch; scenarios; then conformance
# and bench, which may use all. No file includes a folder above its own, nor its sibling (tests
# included: a test may reach down, never up or across).
above() {
  case "$1" in
    core) echo "sim net launch scenarios conformance bench" ;;
    sim) echo "net launch scenarios conformance bench" ;;
    net) echo "sim launch scenarios conformance bench" ;;
    launch) echo "sim scenarios conformance bench" ;;
    scenarios) echo "conformance bench" ;;
  esac
}
for layer in core sim net launch scenarios; do
  [ -d "$layer" ] || continue
  forbidden=$(above "$layer" | tr ' ' '|')
  if hits=$(grep -rnE "#include *[<\"]($forbidden)/" --include='*.h' --include='*.cc' --include='*.cu' "$layer" 2>/dev/null \
            | grep -vE '^launch/(launch_test_util\.h|[a-z_]+_cli_test\.cc):.*scenarios/cli/cli_test_util\.h'); then
    echo "$layer/ must not include a folder above it or beside it ($(above "$layer")):"; echo "$hits"; status=1
  fi
done
# compute/ (issue 53): its kernels see pointers, shapes and dtypes only, so core/tensor calls them and
# nothing there calls back; its device backends are plugged in from above, so core/ never names one
# (tests aside: a core test may plug in the simulated GPU, as scenarios do). compute/ as a whole
# reaches nothing above core.
if hits=$(grep -rnE '#include *[<"](core|compute|sim|net|launch|scenarios|conformance|bench)/' compute/kernels 2>/dev/null \
          | grep -v '_test\.cc:\|_test_util\.h:' | grep -vE '#include *"(compute/kernels/|core/base/|core/tensor/dtype\.h)'); then
  echo "compute/kernels/ includes only compute/kernels/, core/base/ and core/tensor/dtype.h:"; echo "$hits"; status=1
fi
if hits=$(grep -rnE '#include *[<"]compute/device/' core 2>/dev/null | grep -v '_test\.cc:\|_test_util\.h:'); then
  echo "core/ must not include compute/device/ (the backends are plugged in from above):"; echo "$hits"; status=1
fi
if hits=$(grep -rnE '#include *[<"](sim|net|launch|scenarios|conformance|bench)/' compute 2>/dev/null); then
  echo "compute/ must not include a folder above core:"; echo "$hits"; status=1
fi
# The seam's interfaces and primitives do not depend on what implements them (tests aside).
if hits=$(grep -rnE '#include *[<"]core/fibers/' core/runtime 2>/dev/null | grep -v '_test\.cc:'); then
  echo "core/runtime/ (the seam) must not include core/fibers/ (its implementations):"; echo "$hits"; status=1
fi
if hits=$(grep -rnE '#include *[<"]sim/' scenarios 2>/dev/null | grep -v '^scenarios/run/runner\.cc:'); then
  echo "scenarios/ includes sim/ only in run/runner.cc (workloads see a Cluster and an Env):"; echo "$hits"; status=1
fi
pattern='std::thread|this_thread::sleep|this_fiber::sleep|wait_for\(|try_lock_for|system_clock|steady_clock::now|std::rand\(|random_device|uniform_(int|real)_distribution|normal_distribution|std::mutex|std::condition_variable'
for dir in core compute sim; do
  [ -d "$dir" ] || continue
  if hits=$(grep -rnE "$pattern" --include='*.h' --include='*.cc' "$dir" | grep -v '_test\.cc:' | grep -vE '^\S+:[0-9]+:\s*//'); then
    echo "determinism: $dir/ must not use real time, OS threads or std distributions:"; echo "$hits"; status=1
  fi
done
# The continuous random draws replay across machines only if no libm function computes them
# (core/base/prng_math.h): IEEE-754's sqrt is allowed, libm's log/exp/sin/cos/pow... are not.
libm='(std)?::(log|log1p|log2|log10|exp|exp2|expm1|sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|tanh|pow|cbrt|hypot|erf|erfc|lgamma|tgamma)\b'
if hits=$(grep -nE "(^|[^A-Za-z0-9_])$libm" core/base/prng.h core/base/prng.cc core/base/prng_math.h core/base/prng_math.cc); then
  echo "determinism: the Prng's draws must not call libm (use core/base/prng_math.h):"; echo "$hits"; status=1
fi
[ $status -eq 0 ] && echo "rules hold"
exit $status
