#!/usr/bin/env bash
# Installs the Debian packages dagsim needs, and only those that are missing.
# Idempotent: a machine that has everything runs no apt-get at all.
# Optional groups: `scripts/deps.sh report` adds what scripts/transport_report.py needs for its
# plots (python3-matplotlib); `scripts/deps.sh test` adds the real counterparts the interop tests
# run against (Debian's python3-torch for PyTorch's TCPStore, etcd-server for the etcd backend,
# python3-etcd for torchrun's etcd-v2 backend in a [job],
# xmllint and python3-junitparser that read `dagsim check --junit` as CI tools do, headless
# chromium that renders `dagsim report` pages, slurm-wlm with munge for `srun dagsim launch`
# on a one-host Slurm, and zsh, whose completion for dagsim completion_test checks beside bash's),
# which the test command installs and the main job does not. With no argument, only the packages
# below.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libboost-fiber-dev libboost-context-dev
  libopenblas-serial-dev libsleef-dev libdnnl-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  libtomlplusplus-dev libcli11-dev nlohmann-json3-dev libfmt-dev libxxhash-dev libssl-dev
  # scripts/fuzz.sh: clang-14, its libFuzzer runtime, llvm-symbolizer (readable sanitizer stacks)
  clang libclang-rt-14-dev llvm-14
)
case "${1:-}" in
  "") ;;
  report) packages+=(python3-matplotlib) ;;
  test) packages+=(python3-torch etcd-server python3-etcd libxml2-utils python3-junitparser chromium slurm-wlm zsh) ;;
  *) echo "usage: scripts/deps.sh [report|test]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "dagsim: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "dagsim: need root or sudo to apt-get install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
