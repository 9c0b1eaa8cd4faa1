// The workers' interpreter: which one `dagsim launch` runs, said as an absolute path, and whether a
// failed job looks like that interpreter lacked a module.
//
// Why: torchrun runs sys.executable, the Python that runs torchrun, so the workers have torch
// whenever torchrun could start. dagsim is not Python: its workers run --python (python3 from PATH
// by default, launch_flags.h), and a PATH whose first python3 lacks torch (a pyenv shim, a venv not
// activated) fails every worker with "No module named 'torch'". The launcher says which
// interpreter it runs before the workers start, and, when the job fails with that error in a
// worker's error file, its stderr.log or the failure's message, names the interpreter again with
// --python and DAGSIM_PYTHON to choose another.
//
// Promises:
//  - resolve_program: a name without '/' is looked up in PATH as execvp does (the first executable
//    regular file); a path is made absolute; nullopt when nothing on PATH is executable.
//  - missing_module: the first "No module named ..." (ModuleNotFoundError's and ImportError's
//    words) in the text, as one line of at most 200 bytes, or nullopt.
//  - find_missing_module: the same over every attempt_*/<rank>/error.json and stderr.log under a
//    run's log folder (each read up to 1 MiB), then `also` (the failure's message).
// Nothing here throws for a file that cannot be read: a hint is not worth failing for.
#pragma once

#include <optional>
#include <string>

namespace dagsim::launch {

std::optional<std::string> resolve_program(const std::string& program, const std::string& path_env);

std::optional<std::string> missing_module(const std::string& text);

std::optional<std::string> find_missing_module(const std::string& run_log_dir, const std::string& also);

// The line for the operator when the job failed: names `python` (as given) and where it resolved,
// and, when `missing` is set, the missing module and how to choose another interpreter.
std::string interpreter_note(const std::string& python, const std::optional<std::string>& resolved,
                             const std::optional<std::string>& missing);

}  // namespace dagsim::launch
