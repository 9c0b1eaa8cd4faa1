#!/usr/bin/env bash
# scripts/fuzz.sh: builds the libFuzzer targets (net/fuzz/envelope_fuzz.cc, net/fuzz/handshake_fuzz.cc,
# net/fuzz/tcpstore_fuzz.cc, net/fuzz/store_delta_fuzz.cc, scenarios/run/control_fuzz.cc (the TCP
# launcher's control protocol), launch/slurm_hostlist_fuzz.cc (Slurm's host lists and environment),
# launch/launch_input_fuzz.cc (dagsim launch's command line and its workers' error files),
# net/fuzz/file_store_fuzz.cc (FileStore's files), net/fuzz/etcd_reply_fuzz.cc (etcd's replies), net/fuzz/secure_channel_fuzz.cc (mutual TLS and the
# identity exchange of every connection), scenarios/workloads/rendezvous/pickle_fuzz.cc (dagsim judge's
# restricted unpickler), scenarios/workloads/rendezvous/store_record_fuzz.cc (a store's record as
# dagsim judge reads it), net/fuzz/store_restore_fuzz.cc (dagsim store --restore), scenarios/workloads/job/job_records_fuzz.cc
# (a job run's records as dagsim judge reads them), scenarios/cli/sweep_summary_fuzz.cc (a sweep's summary as dagsim report reads
# it), scenarios/cli/shard_results_fuzz.cc (a shard's results as dagsim merge reads them), and net/fuzz/execute_fuzz.cc, which executes decoded calls of every
# op with all of core/ compiled in) with clang-14 under ASan + UBSan, and runs each for
# DAGSIM_FUZZ_SECONDS (default 60) seconds from a copy of its committed corpus
# (net/fuzz/corpus/<target>/). CTest runs it once per target (net/CMakeLists.txt, label fuzz).
#
# Usage: scripts/fuzz.sh [BUILD_DIR [TARGET]]
#   BUILD_DIR  where objects, binaries, run corpora and crash artifacts go (default build/fuzz)
#   TARGET     envelope, handshake, tcpstore, store_faults, store_delta, control, slurm_hostlist, launch_input, file_store, etcd_reply,
#              secure_channel, pickle, store_record, sweep_summary, shard_results, store_restore,
#              job_records, execute or all
#              (default all)
#
# Promises:
#  - exit 0 only when every run ended clean; 1 on any crash, leak, sanitizer report, timeout
#    (-timeout=10 per input), memory blow-up (-rss_limit_mb=2048) or failed build, with the
#    report, the saved input and the command that replays it printed;
#  - exit 77 (CTest's SKIP_RETURN_CODE) when clang++ or libFuzzer is missing, saying which;
#  - the committed corpus is never written: each run works on a copy (BUILD_DIR/run-TARGET/,
#    kept until the next run so new inputs can be inspected or merged by hand);
#  - every compile and link holds a lock (DAGSIM_BUILD_LOCK if set, else BUILD_DIR/.build.lock:
#    the two targets, run as two CTest tests at once, share object files; a machine-wide lock held
#    by whoever runs CTest would deadlock here, so it is only taken when asked for), and a
#    binary newer than everything it was built from (clang's dependency files, and this script)
#    is not rebuilt, so a repeated run only fuzzes.
# Replaying a crash: BUILD_DIR/TARGET_fuzz ARTIFACT (DAGSIM_FUZZ_TRACE=1 says what the input did).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
script="$root/scripts/fuzz.sh"
build_arg=${1:-$root/build/fuzz}
which_target=${2:-all}
seconds=${DAGSIM_FUZZ_SECONDS:-60}

case "$which_target" in
  envelope | handshake | tcpstore | store_faults | store_delta | control | slurm_hostlist | launch_input | file_store | etcd_reply | secure_channel | pickle | store_record | sweep_summary | shard_results | store_restore | job_records | execute) targets=("$which_target") ;;
  all) targets=(envelope handshake tcpstore store_faults store_delta control slurm_hostlist launch_input file_store etcd_reply secure_channel pickle store_record sweep_summary shard_results store_restore job_records execute) ;;
  *) echo "fuzz.sh: unknown target '$which_target' (envelope, handshake, tcpstore, store_faults, store_delta, control, slurm_hostlist, launch_input, file_store, etcd_reply, secure_channel, pickle, store_record, sweep_summary, shard_results, store_restore, job_records, execute or all)" >&2; exit 2 ;;
esac
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: DAGSIM_FUZZ_SECONDS must be a positive number of seconds, not '$seconds'" >&2
  exit 2
fi

# The toolchain: clang-14 and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev).
cxx=""
for candidate in clang++-14 clang++; do
  if command -v "$candidate" >/dev/null; then cxx=$(command -v "$candidate"); break; fi
done
if [ -z "$cxx" ]; then
  echo "fuzz.sh: SKIP: no clang++ (install clang and libclang-rt-14-dev, see scripts/deps.sh)"
  exit 77
fi
runtime_dir=$("$cxx" --print-runtime-dir 2>/dev/null || true)
if [ ! -f "$runtime_dir/libclang_rt.fuzzer-$(uname -m).a" ]; then
  echo "fuzz.sh: SKIP: $cxx has no libFuzzer runtime (libclang_rt.fuzzer-$(uname -m).a not in '$runtime_dir';" \
    "install libclang-rt-14-dev, see scripts/deps.sh)"
  exit 77
fi
if ! command -v flock >/dev/null; then
  echo "fuzz.sh: flock is missing (util-linux): the two targets' builds must take turns" >&2
  exit 1
fi

mkdir -p "$build_arg"
build=$(cd "$build_arg" && pwd)
lock=${DAGSIM_BUILD_LOCK:-$build/.build.lock}

# Debug info and -O1 for readable stacks at a usable speed; UBSan findings abort like ASan's.
# shellcheck disable=SC2054  # the commas belong to -fsanitize=
cxxflags=(-std=c++20 -g -O1 -fno-omit-frame-pointer
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -Wall -Wextra -Wno-unused-parameter -I"$root")
# Only what the two pieces need: core/rpc/wire.h's tensor code is inline and unused here, so no
# core/ library (built by gcc, uninstrumented) is linked.
# The code probes' table (core/base/probe.h) is generated, as the CMake build generates it, into the
# fuzz build folder: any source that marks a probe links against it (an absolute path below).
probe_table="$build/generated/probe_table.cc"
common_sources=(net/crypto.cc core/base/error.cc core/base/assert.cc core/base/probe.cc "$probe_table")
# What dagsim judge decodes a rendezvous state with: the restricted unpickler, PyTorch's state read
# from its values, dagsim's own encoding, base64.
judge_sources=(scenarios/workloads/rendezvous/restricted_unpickler.cc scenarios/workloads/rendezvous/pytorch_state.cc
  core/rendezvous/rendezvous_state.cc core/rendezvous/rendezvous_settings.cc net/etcd/etcd_codec.cc core/base/printable.cc)
sources_of() {
  case "$1" in
    envelope) echo net/fuzz/envelope_fuzz.cc net/envelope.cc "${common_sources[@]}" ;;
    handshake) echo net/fuzz/handshake_fuzz.cc net/handshake.cc "${common_sources[@]}" ;;
    tcpstore) echo net/fuzz/tcpstore_fuzz.cc net/tcpstore/tcp_store_protocol.cc "${common_sources[@]}" ;;
    store_faults) echo net/fuzz/store_faults_fuzz.cc net/tcpstore/store_faults.cc net/tcpstore/tcp_store_protocol.cc \
      core/base/bounded_file.cc core/base/printable.cc "${common_sources[@]}" ;;
    store_delta) echo net/fuzz/store_delta_fuzz.cc core/store/value_delta.cc "${common_sources[@]}" ;;
    control) echo scenarios/run/control_fuzz.cc scenarios/run/control_messages.cc "${common_sources[@]}" ;;
    slurm_hostlist) echo launch/slurm_hostlist_fuzz.cc launch/slurm_env.cc core/base/printable.cc "${common_sources[@]}" ;;
    launch_input) echo launch/launch_input_fuzz.cc launch/launch_flags.cc launch/slurm_env.cc net/worker_error_file.cc \
      core/base/bounded_file.cc core/base/printable.cc "${common_sources[@]}" ;;
    secure_channel) echo net/fuzz/secure_channel_fuzz.cc net/secure_channel.cc net/credentials.cc core/base/printable.cc core/base/bounded_file.cc "${common_sources[@]}" ;;
    file_store) echo net/fuzz/file_store_fuzz.cc net/file_store_format.cc core/base/printable.cc "${common_sources[@]}" ;;
    etcd_reply) echo net/fuzz/etcd_reply_fuzz.cc net/etcd/etcd_reply.cc net/etcd/etcd_codec.cc core/base/printable.cc "${common_sources[@]}" ;;
    pickle) echo scenarios/workloads/rendezvous/pickle_fuzz.cc "${judge_sources[@]}" "${common_sources[@]}" ;;
    store_record) echo scenarios/workloads/rendezvous/store_record_fuzz.cc scenarios/workloads/rendezvous/store_record_reader.cc \
      scenarios/format/bounded_json.cc "${judge_sources[@]}" "${common_sources[@]}" ;;
    sweep_summary) echo scenarios/cli/sweep_summary_fuzz.cc scenarios/cli/sweep_summary.cc scenarios/cli/sweep_digest.cc scenarios/format/bounded_json.cc \
      core/base/bounded_file.cc core/base/printable.cc "${common_sources[@]}" ;;
    shard_results) echo scenarios/cli/shard_results_fuzz.cc scenarios/cli/shard_results.cc scenarios/cli/shard_plan.cc \
      scenarios/format/bounded_json.cc core/base/bounded_file.cc core/base/printable.cc "${common_sources[@]}" ;;
    store_restore) echo net/fuzz/store_restore_fuzz.cc net/tcpstore/store_restore.cc net/tcpstore/store_recorder.cc \
      net/tcpstore/tcp_store_protocol.cc core/store/key_value_table.cc core/store/store_integer.cc core/store/value_delta.cc \
      core/runtime/wait.cc core/runtime/cancel_scope.cc core/runtime/fiber_context.cc \
      core/store/store_wait.cc core/base/printable.cc "${common_sources[@]}" ;;
    job_records) echo scenarios/workloads/job/job_records_fuzz.cc scenarios/workloads/job/job_records.cc \
      scenarios/workloads/job/job_report.cc scenarios/run/records.cc core/runtime/cluster.cc core/base/printable.cc \
      core/base/bounded_file.cc scenarios/format/bounded_json.cc "${common_sources[@]}" ;;
    # All of core/ but its tests: an op runs tensors, autograd and the registry, which reach the rest.
    execute) echo net/fuzz/execute_fuzz.cc $(cd "$root" && find core compute -name '*.cc' ! -name '*_test.cc' ! -path 'compute/device/cuda/*' | LC_ALL=C sort) "$probe_table" ;;
  esac
}
# What a target links beyond the sanitizers, and the include flags it compiles with.
libs_of() {
  case "$1" in
    execute) echo "$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas) -lsleef -ldnnl -ldl -lboost_fiber -lboost_context -lxxhash -lpthread" ;;
    secure_channel) echo "-lssl -lcrypto" ;;
    store_restore) echo "-lboost_fiber -lboost_context -lcrypto -lpthread" ;;
    *) echo "-lcrypto" ;;
  esac
}
extra_cxxflags_of() {
  case "$1" in
    execute) pkg-config --cflags openblas 2>/dev/null || true ;;
  esac
}
# Per-file flags, as core/CMakeLists.txt gives them: each CPU capability's kernels for its target.
source_flags_of() {
  case "$1" in
    compute/kernels/vector_kernels_scalar.cc) echo "-ffp-contract=off" ;;
    compute/kernels/vector_kernels_avx2.cc) echo "-mavx2 -mfma -ffp-contract=off" ;;
    compute/kernels/vector_kernels_avx512.cc) echo "-mavx512f -mfma -ffp-contract=off" ;;
    compute/kernels/gemm_avx512.cc) echo "-mavx512f -mavx512dq -mavx512vl -mfma -I/usr/include/eigen3" ;;
  esac
}
corpus_of() { echo "$root/net/fuzz/corpus/$1"; }

# True when $1 exists and none of the other files is newer (or missing).
newer_than_all() {
  local out=$1
  shift
  [ -e "$out" ] || return 1
  local f
  for f in "$@"; do
    if [ ! -e "$f" ] || [ "$f" -nt "$out" ]; then return 1; fi
  done
}

# The files a make-style dependency file (clang -MMD) names.
deps_in() {
  sed -e '1s/^[^:]*://' -e 's/\\$//' "$1" | tr -s ' \t' '\n' | sed '/^$/d'
}

build_target() {
  local target=$1
  local objdir="$build/obj-$target" binary="$build/${target}_fuzz"
  mkdir -p "$objdir"
  local objects=() deps=() src obj started=$SECONDS built=0
  for src in $(sources_of "$target"); do
    obj="$objdir/$(echo "$src" | tr '/' '_').o"
    objects+=("$obj")
    if [ -e "$obj.d" ]; then
      mapfile -t deps < <(deps_in "$obj.d")
      if newer_than_all "$obj" "$script" "${deps[@]}"; then continue; fi
    fi
    # Written aside and moved into place, so an interrupted compile never looks up to date.
    # (Called from an `if`, where set -e does not act: each step checks its own status.)
    # shellcheck disable=SC2046  # the extra flags are words
    local path="$root/$src"
    [[ "$src" == /* ]] && path=$src  # the generated probe table
    flock "$lock" "$cxx" "${cxxflags[@]}" $(extra_cxxflags_of "$target") $(source_flags_of "$src") -MMD -MF "$obj.d.tmp" -c "$path" -o "$obj.tmp" || return 1
    mv "$obj.d.tmp" "$obj.d" && mv "$obj.tmp" "$obj" || return 1
    built=1
  done
  if [ $built -eq 1 ] || ! newer_than_all "$binary" "${objects[@]}"; then
    # shellcheck disable=SC2046  # the libraries are words
    flock "$lock" "$cxx" "${cxxflags[@]}" "${objects[@]}" $(libs_of "$target") -o "$binary.tmp" || return 1
    mv "$binary.tmp" "$binary" || return 1
    echo "fuzz.sh: built $binary in $((SECONDS - started)) s"
  else
    echo "fuzz.sh: $binary is up to date"
  fi
}

run_target() {
  local target=$1
  local binary="$build/${target}_fuzz" corpus
  corpus=$(corpus_of "$target")
  local work="$build/run-$target" artifacts="$build/artifacts/$target" log="$build/$target.log"
  if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus")" ]; then
    echo "fuzz.sh: the committed corpus $corpus is missing or empty" >&2
    return 1
  fi
  # (Called after `||`, where set -e does not act: each step checks its own status.)
  rm -rf "$work" && mkdir -p "$work" "$artifacts" && cp -R "$corpus/." "$work/" || return 1
  touch "$work.started" || return 1  # artifacts newer than this are this run's (older ones are kept)

  local symbolizer
  symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)
  # Ours come last so they win over anything inherited; libFuzzer's own exit code for a finding is
  # 77 by default, which CTest would read as a skip, hence -error_exitcode=1.
  local rc=0
  env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:symbolize=1" \
    LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$root/net/fuzz/lsan.supp" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1" \
    ${symbolizer:+"ASAN_SYMBOLIZER_PATH=$symbolizer"} \
    "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" >"$log" 2>&1 || rc=$?

  # A sanitizer report that did not stop the run still fails it.
  if [ $rc -eq 0 ] && grep -qE 'runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer' "$log"; then rc=1; fi
  if [ $rc -ne 0 ]; then
    echo "fuzz.sh: $target FAILED (exit $rc); its report, progress lines left out (full log: $log):"
    grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|RELOAD)' "$log" | tail -n 200
    local artifact
    find "$artifacts" -type f -newer "$work.started" -printf '%T@ %p\n' | sort -rn | head -n 3 | cut -d' ' -f2- |
      while read -r artifact; do
        echo "fuzz.sh: saved input: $artifact"
        echo "fuzz.sh:   replay:  DAGSIM_FUZZ_TRACE=1 $binary $artifact"
      done
    return 1
  fi
  local runs speed rss done_line
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 | sed -E 's/^#[0-9]+[[:space:]]+DONE[[:space:]]+//')
  echo "fuzz.sh: $target clean after $seconds s: $runs executions ($speed/s), peak RSS $rss MB; $done_line"
}

status=0
mkdir -p "$build/generated"
if ! flock "$lock" cmake -DSOURCE_DIR="$root" -DOUTPUT="$probe_table" -P "$root/cmake/DagsimProbeTable.cmake"; then
  echo "fuzz.sh: could not write the probe table $probe_table" >&2
  exit 1
fi
for target in "${targets[@]}"; do
  if ! build_target "$target"; then
    echo "fuzz.sh: building the $target target failed" >&2
    status=1
    continue
  fi
  run_target "$target" || status=1
done
exit $status
