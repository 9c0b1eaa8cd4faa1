#!/usr/bin/env bash
# The TCPStore interop checks (issue 11 item 1), each against the real PyTorch 1.13:
#   run_interop.sh torch-client DAGSIM      a PyTorch client (torch_client.py) against `dagsim store`
#   run_interop.sh torch-server TEST_BINARY dagsim's TcpStoreClient (tcpstore_interop_test) against
#                                           a PyTorch server (torch_server.py)
#   run_interop.sh dagsim-server TEST_BINARY DAGSIM  the same test binary against `dagsim store`
#   run_interop.sh diff DAGSIM              tcpstore_diff.py's probes against PyTorch's server and
#                                           against `dagsim store`, compared
#   run_interop.sh clients DAGSIM N M       N concurrent connections speaking the protocol, then M
#                                           concurrent PyTorch clients, against `dagsim store`
#   run_interop.sh launch-env DAGSIM N [static]  a worker's environment under `dagsim launch`
#                                           against torchrun's, N agents x 2 workers, c10d or
#                                           torchrun's default static backend (launch_env.py)
#   run_interop.sh launch-static DAGSIM     the static backend on two agents, a DDP job under both
#                                           launchers (launch_static.py)
#   run_interop.sh launch-flags DAGSIM      every flag of torchrun --help under both launchers,
#                                           side by side (launch_flags_table.py)
#   run_interop.sh launch-ddp DAGSIM        an elastic DDP job under `dagsim launch` through a
#                                           killed worker, a killed agent and a late joiner
#                                           (launch_ddp.py)
# Exits 77 (CTest: skipped) with a message when /usr/bin/python3 cannot import torch.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
mode=${1:?mode}
if [ "$mode" != dagsim-server ] && ! "$python" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: $python cannot import torch.distributed (install python3-torch: scripts/deps.sh test)"
  exit 77
fi
tmp=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# Starts "$@" in the background with its stdout in $tmp/port, and waits for the port line.
start_server() {
  rm -f "$tmp/stdin" "$tmp/port"
  mkfifo "$tmp/stdin"
  "$@" <"$tmp/stdin" >"$tmp/port" 2>"$tmp/server.log" &
  server_pid=$!
  exec 3>"$tmp/stdin"  # keeps the server's stdin open (torch_server.py serves until it closes)
  for _ in $(seq 1 300); do
    port=$(head -n1 "$tmp/port" 2>/dev/null)
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: the server did not print its port:"; cat "$tmp/server.log"; exit 1
}

case "$mode" in
  torch-client)
    start_server "${2:?dagsim binary}" store --port 0
    timeout 120 "$python" "$here/torch_client.py" 127.0.0.1 "$port"; rc=$?
    echo "--- dagsim store's log:"; kill "$server_pid"; wait "$server_pid"; server_rc=$?; server_pid=""
    cat "$tmp/server.log"
    [ $server_rc -eq 0 ] || { echo "FAIL: dagsim store exited $server_rc after SIGTERM"; exit 1; }
    exit $rc ;;
  torch-server)
    start_server "$python" "$here/torch_server.py"
    DAGSIM_TCPSTORE_ADDRESS=127.0.0.1:$port DAGSIM_TCPSTORE_SERVER=pytorch timeout 300 "${2:?test binary}"; exit $? ;;
  dagsim-server)
    start_server "${3:?dagsim binary}" store --port 0
    DAGSIM_TCPSTORE_ADDRESS=127.0.0.1:$port DAGSIM_TCPSTORE_SERVER=dagsim timeout 300 "${2:?test binary}"; exit $? ;;
  diff)
    start_server "$python" "$here/torch_server.py"
    timeout 240 "$python" "$here/tcpstore_diff.py" probe 127.0.0.1 "$port" >"$tmp/torch.json" || {
      echo "FAIL: the probes against PyTorch's server did not finish"; cat "$tmp/server.log"; exit 1; }
    exec 3>&-; kill "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=""
    start_server "${2:?dagsim binary}" store --port 0
    timeout 240 "$python" "$here/tcpstore_diff.py" probe 127.0.0.1 "$port" >"$tmp/dagsim.json" || {
      echo "FAIL: the probes against dagsim store did not finish"; cat "$tmp/server.log"; exit 1; }
    "$python" "$here/tcpstore_diff.py" compare "$tmp/torch.json" "$tmp/dagsim.json"; rc=$?
    echo "--- dagsim store's log:"; cat "$tmp/server.log"
    exit $rc ;;
  clients)
    start_server "${2:?dagsim binary}" store --port 0
    n=${3:?connection count}
    m=${4:?PyTorch client count}
    hard=$(ulimit -Hn)
    if [ "$hard" != unlimited ] && [ "$hard" -lt $((n + 1000)) ]; then
      echo "SKIP: $n connections need about $((n + 1000)) file descriptors on each side; the hard limit here is $hard"
      exit 77
    fi
    counted=$(timeout 120 "$python" "$here/tcpstore_diff.py" raw-clients 127.0.0.1 "$port" "$n"); rc=$?
    [ $rc -eq 0 ] && [ "$counted" = "$n" ] || {
      echo "FAIL: $n connections, $counted counted (exit $rc)"; cat "$tmp/server.log"; exit 1; }
    echo "ok: $n concurrent connections, each add counted before and after the last one opened"
    counted=$(timeout 150 "$python" "$here/tcpstore_diff.py" clients 127.0.0.1 "$port" "$m"); rc=$?
    echo "--- dagsim store's log:"; cat "$tmp/server.log"
    [ $rc -eq 0 ] && [ "$counted" = "$m" ] || { echo "FAIL: $m PyTorch clients, $counted counted (exit $rc)"; exit 1; }
    echo "PASS: $n concurrent connections and $m concurrent PyTorch clients, every add counted"; exit 0 ;;
  launch-env)
    PATH=/usr/bin:$PATH timeout 280 "$python" "$here/launch_env.py" "${2:?dagsim binary}" "${3:?agents}" "${4:-c10d}"
    exit $? ;;
  launch-static)
    timeout 280 "$python" "$here/launch_static.py" "${2:?dagsim binary}"
    exit $? ;;
  launch-flags)
    timeout 560 "$python" "$here/launch_flags_table.py" "${2:?dagsim binary}"
    exit $? ;;
  launch-ddp)
    timeout 440 "$python" "$here/launch_ddp.py" "${2:?dagsim binary}"
    exit $? ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
