#!/usr/bin/env bash
# The sanitizer tier (issue 23, item 9): builds every target with AddressSanitizer and
# UndefinedBehaviorSanitizer (gcc, -fno-sanitize-recover: the first report ends the process) in
# its own folder, and runs the whole CTest suite under them: unit tests, conformance and
# property suites, the hostile suites, the TCP and interop tests (whose node processes are the
# sanitized binary too). The fuzz targets are left out: scripts/fuzz.sh already runs them under
# both sanitizers, with clang.
#
# Usage: scripts/sanitize.sh            (JOBS, default the number of cores; CTEST_ARGS, more
#                                        arguments for ctest, e.g. "-R Engine"; SANITIZE_BUILD_DIR,
#                                        default build-sanitize)
# Exit 0 only when every test passed with no sanitizer report.
#
# What cannot run under AddressSanitizer skips, saying why (core/base/sanitizers.h): its shadow
# memory takes terabytes of address space, so --max-memory (RLIMIT_AS) cannot apply.
# LeakSanitizer ignores one allocation per thread that outlives its look (net/fuzz/lsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bash scripts/deps.sh test
build=${SANITIZE_BUILD_DIR:-build-sanitize}
# A compiler cache of its own: the sanitized objects would otherwise push the main build's out of
# the shared one, and the next plain build (CI's) would start from nothing.
if [ -z "${CCACHE_DIR:-}" ] && command -v ccache >/dev/null; then
  CCACHE_DIR="$(ccache -k cache_dir)-sanitize"
  export CCACHE_DIR
fi
jobs=${JOBS:-$(nproc)}
# -O1 -g1, as the sanitizers' authors advise: fast enough to run, file and line in every report,
# and a shorter build than -O2 -g. Without the cuda backend: ASan's shadow memory and the CUDA
# driver's address-space reservations do not mix, and CI has no GPU to test it on anyway.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DDAGSIM_SANITIZE=address,undefined -DDAGSIM_CUDA=OFF \
  -DDAGSIM_BUILD_BENCH=OFF -DDAGSIM_WERROR="${DAGSIM_WERROR:-OFF}" >/dev/null
started=$SECONDS
cmake --build "$build" -j "$jobs"
echo "sanitize: built in $((SECONDS - started)) s"
# Stack switches between fibers (Boost.Context) are not annotated for ASan: detecting
# use-after-return on fiber stacks would report what is not there.
# Reports go to files, one per process, not to stderr: ASan warns once per process when a fiber
# throws ("ignoring requested __asan_handle_no_return", the same unannotated stack switches), and
# that line would break every test that checks a command's exact stderr. A report still ends its
# process with an error (halt_on_error), failing its test; the reports are printed at the end.
logs="$root/$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=0:halt_on_error=1:abort_on_error=0:log_path=$logs/asan:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/net/fuzz/lsan.supp:${LSAN_OPTIONS:-}"
cd "$build"
started=$SECONDS
status=0
ctest --output-on-failure -j "$jobs" --timeout 1800 -LE fuzz ${CTEST_ARGS:-} || status=$?
echo "sanitize: suite ran in $((SECONDS - started)) s, exit $status"
reports=$(grep -l -E "ERROR: |runtime error:" "$logs"/* 2>/dev/null || true)
for report in $reports; do
  echo "sanitize: report in $report:"
  cat "$report"
done
if [ -n "$reports" ]; then
  echo "sanitize: $(echo "$reports" | wc -w) sanitizer report(s), listed above"
  status=1
fi
exit $status
