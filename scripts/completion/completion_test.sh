#!/usr/bin/env bash
# The shell completions (scripts/completion/dagsim.bash and _dagsim) against the binary they
# complete. Usage: completion_test.sh DAGSIM SOURCE_DIR
#
# In bash: `dagsim ru<TAB>` gives run, `dagsim run --se<TAB>` --seed, a flag's choices and a
# scenario file complete; `dagsim <TAB>` lists exactly the commands of `dagsim --help`, and
# `dagsim COMMAND --<TAB>` exactly the long flags of `dagsim COMMAND --help`, for every command
# (launch included, whatever parser prints its help). The same in zsh where zsh is installed
# (with compadd, _describe and _files stubbed: they only exist inside a completion widget).
# The expected lists are read from the help texts here, independently of how the completions
# read them, so a help format the completions misread fails the test.
set -uo pipefail
dagsim=$(realpath "$1")
source_dir=$2
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

expect() {  # WHAT EXPECTED ACTUAL (space-separated words, compared as sorted sets)
  local want got
  want=$(tr ' ' '\n' <<<"$2" | sed '/^$/d' | sort -u | tr '\n' ' ')
  got=$(tr ' ' '\n' <<<"$3" | sed '/^$/d' | sort -u | tr '\n' ' ')
  [[ $want == "$got" ]] || fail "$1: expected [$want], got [$got]"
}

# The commands `dagsim --help` (CLI11) lists under "Subcommands:".
commands=$("$dagsim" --help | sed -n '/^Subcommands:$/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p' | tr '\n' ' ')
[[ $(wc -w <<<"$commands") -ge 8 ]] || fail "dagsim --help lists too few commands: [$commands]"

# The long flags of `dagsim COMMAND --help`: on each line that starts "  -", every --name before
# the description or the defaults (two spaces) and before what CLI11 appends (Needs:, Excludes:,
# (Env:...)).
long_flags() {
  "$dagsim" "$1" --help | grep '^  -' | sed -e 's/^  //' -e 's/  .*//' -e 's/ Needs:.*//' \
    -e 's/ Excludes:.*//' -e 's/ (Env:.*//' | grep -o -- '--[A-Za-z0-9][A-Za-z0-9_-]*' | tr '\n' ' '
}

# ---- bash ----------------------------------------------------------------------------------
# shellcheck source=dagsim.bash
source "$source_dir/scripts/completion/dagsim.bash"
complete_bash() {  # WORD... : the last word is the one being completed
  COMP_WORDS=("$dagsim" "$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _dagsim
  echo "${COMPREPLY[*]}"
}
cd "$source_dir" || exit 2
expect "bash: dagsim ru<TAB>" "run" "$(complete_bash ru)"
expect "bash: dagsim run --se<TAB>" "--seed" "$(complete_bash run --se)"
expect "bash: dagsim run --transport <TAB>" "sim tcp" "$(complete_bash run --transport '')"
expect "bash: dagsim run scenarios/examples/elastic_tr<TAB>" "scenarios/examples/elastic_training.toml" \
  "$(complete_bash run scenarios/examples/elastic_tr)"
expect "bash: dagsim help la<TAB>" "launch" "$(complete_bash help la)"
expect "bash: dagsim launch --standalone train.py --se<TAB> (the script's own arguments)" "" \
  "$(complete_bash launch --standalone train.py --se)"
# bash splits HOST:29400 and --nnodes=2 at ':' and '=': the value is still one word, not the script.
expect "bash: dagsim launch --rdzv_endpoint HOST:29400 --nn<TAB>" "--nnodes" \
  "$(complete_bash launch --rdzv_endpoint HOST : 29400 --nn)"
expect "bash: dagsim launch --nnodes=1:2 --nn<TAB>" "--nnodes" "$(complete_bash launch --nnodes = 1 : 2 --nn)"
expect "bash: dagsim <TAB>" "$commands" "$(complete_bash '')"
for command in $commands; do
  [[ $command == help ]] && continue
  expect "bash: dagsim $command --<TAB> against dagsim $command --help" "$(long_flags "$command")" \
    "$(complete_bash "$command" --)"
done

# ---- zsh -----------------------------------------------------------------------------------
if ! command -v zsh >/dev/null; then
  echo "zsh is not installed: its completion was not checked"
else
  zsh_out=$(
    DAGSIM="$dagsim" SOURCE_DIR="$source_dir" COMMANDS="$commands" zsh -f -c '
      # Stubs for the completion system: each prints what it would offer, one word a line.
      compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@" }
      _describe() { local -a entries; entries=("${(@P)4}"); print -rl -- ${entries%%:*} }
      _files() { print -r -- "FILES $*" }
      words=(dagsim) CURRENT=1
      source $SOURCE_DIR/scripts/completion/_dagsim >/dev/null
      complete_zsh() {  # WORD...: the last is the one being completed
        words=($DAGSIM "$@") CURRENT=$(( $# + 1 )) PREFIX=${@[-1]}
        print -r -- ${(j: :)${(f)"$(_dagsim)"}}
      }
      print -r -- "ru|$(complete_zsh ru)"
      print -r -- "run --se|$(complete_zsh run --se)"
      print -r -- "run --transport|$(complete_zsh run --transport "")"
      print -r -- "run FILE|$(complete_zsh run scen)"
      print -r -- "TAB|$(complete_zsh "")"
      for command in ${=COMMANDS}; do
        [[ $command == help ]] && continue
        print -r -- "$command --|$(complete_zsh $command --)"
      done
    ')
  [[ -n ${DEBUG:-} ]] && echo "$zsh_out"
  zsh_said() { sed -n "s/^$1|//p" <<<"$zsh_out"; }
  # compadd and _describe offer every candidate; zsh filters by the prefix itself.
  [[ " $(zsh_said ru) " == *" run "* ]] || fail "zsh: dagsim ru<TAB> does not offer run: [$(zsh_said ru)]"
  [[ " $(zsh_said 'run --se') " == *" --seed "* ]] || fail "zsh: dagsim run --se<TAB> does not offer --seed"
  expect "zsh: dagsim run --transport <TAB>" "sim tcp" "$(zsh_said 'run --transport')"
  expect "zsh: dagsim run FILE<TAB>" "FILES -g *.toml(-.)" "$(zsh_said 'run FILE')"
  expect "zsh: dagsim <TAB>" "$commands" "$(zsh_said TAB)"
  for command in $commands; do
    [[ $command == help ]] && continue
    # zsh offers every spelling, short ones too; the long ones must be exactly --help's.
    got=$(zsh_said "$command --" | tr ' ' '\n' | grep -- '^--' | tr '\n' ' ')
    expect "zsh: dagsim $command --<TAB> against dagsim $command --help" "$(long_flags "$command")" "$got"
  done
fi

if ((failures)); then
  echo "$failures completion checks failed" >&2
  exit 1
fi
echo "completion checks passed (commands: $commands)"
