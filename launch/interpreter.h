// The workers' interpreter: which one `dagsim launch` runs, said as an absolute path, and whether a
// failed job looks like that interpreter lacked a module.
//
// Why: torchrun runs sys.executable, the Python that runs torchrun, so the workers have torch
// whenever torchrun could start. dagsim is not Python: its workers run --python (python3 from PATH
// by default, launch_flags.h), and a PATH whose first python3 lacks torch (a pyenv shim, a venv not
// activated) fails every worker with "No module named 'torch'". The launcher says which
// interpreter it runs before the workers start, and, when the job fails, names it again with
// --python and DAGSIM_PYTHON to choose another, and the missing module when a worker's error file,
// its stderr.log or the failure's message says so, or else when the interpreter cannot import torch
// (the workers' stderr went to the terminal, where the launcher cannot read it).
//
// Promises:
//  - resolve_program: a name without '/' is looked up in PATH as execvp does (the first executable
//    regular file); a path is made absolute; nullopt when nothing on PATH is executable.
//  - missing_module: the first "No module named ..." (ModuleNotFoundError's and ImportError's
//    words) in the text, as one line of at most 200 bytes, or nullopt.
//  - find_missing_module: the same over every attempt_*/<rank>/error.json and stderr.log under a
//    run's log folder (each read up to 1 MiB), then `also` (the failure's message).
//  - probe_import: whether `python -c "import MODULE"` fails with ModuleNotFoundError (within 30 s;
//    its output discarded): for a failed job whose workers' stderr went to the terminal, where
//    nothing above can read it. The launcher asks it of torch, the module a torchrun script needs.
// Nothing here throws for a file that cannot be read: a hint is not worth failing for.
#pragma once

#include <optional>
#include <string>

namespace dagsim::launch {

std::optional<std::string> resolve_program(const std::string& program, const std::string& path_env);

std::optional<std::string> missing_module(const std::string& text);

std::optional<std::string> find_missing_module(const std::string& run_log_dir, const std::string& also);

// "No module named 'MODULE'" when `python` cannot import it, else nullopt (it can, or it did not
// run, or it took too long: no claim either way).
std::optional<std::string> probe_import(const std::string& python, const std::string& module);

// The line for the operator when the job failed: names `python` (as given) and where it resolved,
// and, when `missing` is set, the missing module and how to choose another interpreter.
std::string interpreter_note(const std::string& python, const std::optional<std::string>& resolved,
                             const std::optional<std::string>& missing);

}  // namespace dagsim::launch
