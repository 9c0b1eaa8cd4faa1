// parse_launch_flags: `dagsim launch`'s command line, read as torchrun 1.13's argparse reads its own,
// into LaunchArgs, before anything starts. A pure function of argv and an environment lookup, so each
// rule below is a unit test (launch_flags_test.cc) and the CLI (scenarios/cli/main.cc) only calls it.
//
// Promises, each as torchrun 1.13 (torch/distributed/run.py) unless said:
//  - every torchrun 1.13 flag is read: --nnodes, --nproc_per_node, --rdzv_backend, --rdzv_endpoint,
//    --rdzv_id, --rdzv_conf, --standalone, --max_restarts, --monitor_interval, --start_method, --role,
//    -m/--module, --no_python, --run_path, --log_dir, -r/--redirects, -t/--tee, --node_rank,
//    --master_addr, --master_port; and dagsim's own --events, --stop_grace, --python;
//  - each long flag in both spellings, --nproc_per_node and --nproc-per-node (torchrun 2.x's; 1.13
//    knows only the first); `--flag value`, `--flag=value`, `-t3`, `-t 3`;
//  - argparse's abbreviations (allow_abbrev): a unique prefix of a long flag stands for it
//    (`--nproc 2`); a prefix of several is refused naming them (`--master`);
//  - the first token that is not an option is the script, and it and every token after it are
//    the workers', untouched (argparse REMAINDER); `--` ends the options, and the token after it is
//    the script whatever it looks like;
//  - a flag not given takes PET_<FLAG> from the environment (torchrun's `env` and `check_env`
//    actions: PET_NPROC_PER_NODE, PET_MODULE, PET_REDIRECTS, ...; a switch's variable is an integer,
//    non-zero meaning on); --python takes DAGSIM_PYTHON, then torchrun's PYTHON_EXEC;
//  - a value is checked as argparse's type= and choices= check it (int, float, --start_method's
//    three methods): a bad one, from the command line or the environment, is refused naming both;
//  - an unknown option before the script is refused by name, with "did you mean" when a flag is
//    close; it never reaches a worker. `--local_addr` (a torchrun 2.x flag) is refused saying so.
// What each flag does is launch_plan.h's (this only reads them); --start_method is read, checked
// and has no effect: torchrun uses it only to start a Python function (--run_path) with
// multiprocessing, and dagsim's workers are always processes started by exec, spawn's semantics.
// Every refusal is invalid_argument; the CLI exits 2 on it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/launch_args.h"
#include "launch/slurm_env.h"

namespace dagsim::launch {

struct ParsedLaunch {
  LaunchArgs args;
  bool help = false;   // -h/--help came before the script: print launch_help(), start nothing
  GivenFlags given;    // what Slurm's defaults may not replace: given as a flag or a PET_ variable
};

// A variable of the environment, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// `argv`: the tokens after `dagsim launch`. Throws invalid_argument naming the flag (or variable)
// and its value.
ParsedLaunch parse_launch_flags(const std::vector<std::string>& argv, const EnvLookup& env);

// The process's own environment, for parse_launch_flags.
EnvLookup process_environment();

// `dagsim launch --help`: the usage line (`SCRIPT [ARGS...]`), then every flag with its spellings,
// its environment variable and its default.
std::string launch_help();

// Every long spelling and short flag known, for tests: {"--nnodes", "--nproc_per_node", ...}.
std::vector<std::string> launch_flag_spellings();

}  // namespace dagsim::launch
