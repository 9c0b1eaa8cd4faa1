# bash completion for dagsim. `cmake --install` puts it in share/bash-completion/completions/dagsim,
# where bash-completion loads it the first time `dagsim` is completed; or `source` it by hand.
#
# It completes the command, each command's flags, the values of flags that take one of a few
# (--transport sim|tcp, ...), and files for a command's arguments (scenario .toml files for run,
# validate and check; anything after launch's SCRIPT, which is the script's own).
#
# Nothing is listed here: the commands come from `dagsim help` and each command's flags from
# `dagsim COMMAND --help`, asked of the very binary being completed (./build/dagsim as well as an
# installed one), so the completion cannot drift from the flags the binary takes.
# scripts/completion/completion_test.sh checks both, in bash and (where installed) zsh.

# The commands, one a line: `dagsim help` lists each as "  NAME  summary" under "Commands:".
_dagsim_commands() {
  "$1" help 2>/dev/null | sed -n '/^Commands:$/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p'
}

# Each flag of `dagsim COMMAND --help` as "NAMES<TAB>KIND": NAMES its spellings, space-separated,
# and KIND what it takes: "choices A B C", "value" or "none". A flag line starts with two spaces and
# a dash, its spellings joined by ",", ", " or "/" ("  -o,--output TEXT=report.html  ...",
# "  --no-progress{false}  ...", launch's "  --log_dir/--log-dir LOG_DIR  [...]"); a value shows
# as one word right after the names, one space away (CLI11's "TEXT:{sim,tcp}=sim" or "UINT", a
# metavariable in capitals, or "{spawn,fork}"), where a description starts two spaces away.
_dagsim_flag_lines() {
  local line names token rest kind
  while IFS= read -r line; do
    [[ $line == "  -"* ]] || continue
    rest=${line#  } names=""
    while [[ $rest == -* ]]; do
      token=${rest%%[[:space:]]*}
      rest=${rest:${#token}}
      token=${token%%\{*}
      names+=" ${token//[,\/]/ }"  # "-o,--output", "--log_dir/--log-dir"
      [[ $rest == " -"* ]] && rest=${rest# }  # "-r, --redirects": the next spelling
    done
    kind=none
    if [[ $rest =~ ^\ ([A-Z]+:)?\{([^}]*)\} ]]; then
      kind="choices ${BASH_REMATCH[2]//,/ }"
    elif [[ $rest =~ ^\ [A-Z][A-Z0-9_]*([:=[:space:]]|$) ]]; then
      kind=value
    fi
    names=${names//  / }
    printf '%s\t%s\n' "${names# }" "$kind"
  done < <("$1" "$2" --help 2>/dev/null)
}

# Every spelling of every flag COMMAND takes, one a line.
_dagsim_flags() {
  _dagsim_flag_lines "$1" "$2" | cut -f1 | tr ' ' '\n' | sed '/^$/d'
}

# What FLAG of COMMAND takes (as _dagsim_flag_lines says); "none" for a flag it does not know.
_dagsim_flag_kind() {
  local names kind
  while IFS=$'\t' read -r names kind; do
    [[ " $names " == *" $3 "* ]] && { echo "$kind"; return; }
  done < <(_dagsim_flag_lines "$1" "$2")
  echo none
}

_dagsim() {
  local cur=${COMP_WORDS[COMP_CWORD]} prog=${COMP_WORDS[0]}
  COMPREPLY=()
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$(_dagsim_commands "$prog")" -- "$cur")
    return
  fi
  # bash splits words at COMP_WORDBREAKS, ':' and '=' among them: HOST:29400 arrives as HOST, :,
  # 29400 and --nnodes=2 as --nnodes, =, 2. Join them back, so a flag's value is one word, as the
  # command will read it (the word being completed stays COMP_WORDS' own, for bash to insert).
  local -a words=()
  local j w glue=0
  for ((j = 0; j <= COMP_CWORD && j < ${#COMP_WORDS[@]}; j++)); do
    w=${COMP_WORDS[j]}
    if ((j > 1)) && [[ $w == [:=] || $glue == 1 ]]; then
      words[-1]+=$w
    else
      words+=("$w")
    fi
    [[ $w == [:=] ]] && glue=1 || glue=0
  done
  local cword=$((${#words[@]} - 1))
  local command=${words[1]}
  [[ $command == help ]] && {
    ((cword == 2)) && mapfile -t COMPREPLY < <(compgen -W "$(_dagsim_commands "$prog")" -- "$cur")
    return
  }
  # Walk the words before this one: a flag that takes a value consumes the next word; launch's
  # first other word is the script, and everything after it (or after --) is the script's.
  local i word kind prev_kind=none script=0
  for ((i = 2; i < cword; i++)); do
    word=${words[i]}
    if [[ $prev_kind != none ]]; then
      prev_kind=none
    elif [[ $word == -- ]]; then
      script=1
    elif [[ $word == -* && $word != *=* ]]; then
      ((script)) || prev_kind=$(_dagsim_flag_kind "$prog" "$command" "$word")
    elif [[ $word != -* && $command == launch ]]; then
      script=1
    fi
  done
  if [[ $prev_kind == choices* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "${prev_kind#choices }" -- "$cur")
    return
  fi
  if [[ $prev_kind == none && $script == 0 && $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_dagsim_flags "$prog" "$command")" -- "$cur")
    return
  fi
  # A file: scenario files (and folders, to walk into) for a command's FILE, else any path.
  compopt -o filenames 2>/dev/null
  if [[ $prev_kind == none && $script == 0 && $command =~ ^(run|validate|check)$ ]]; then
    mapfile -t COMPREPLY < <(compgen -f -X '!*.toml' -- "$cur"; compgen -d -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}

complete -F _dagsim dagsim
