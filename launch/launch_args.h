// LaunchArgs: the flags of `dagsim launch`, torchrun's interface on dagsim's elastic agent
// (docs/cli.md, docs/torchrun.md), as data. parse_launch_flags (launch_flags.h) fills them from the
// command line: every torchrun 1.13 flag in both spellings (--nproc_per_node and --nproc-per-node)
// and PET_<FLAG> environment variables, as torchrun's do. plan_launch (launch_plan.h) checks them;
// the Launcher (launcher.h) runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dagsim::launch {

struct LaunchArgs {
  std::string nnodes = "1:1";           // N or MIN:MAX
  std::string nproc_per_node = "1";     // a number, or auto/cpu (the cores here); gpu is refused
  std::string rdzv_backend = "static";  // torchrun 1.13's default: --master_addr/--master_port/--node_rank
  std::string rdzv_endpoint;            // HOST[:PORT]
  std::string rdzv_id = "none";
  std::string rdzv_conf;                // k=v,k=v
  bool standalone = false;
  uint32_t max_restarts = 0;
  double monitor_interval_s = 5;
  std::string role = "default";
  std::string log_dir;                  // "": a fresh torchelastic_* folder in the temporary folder
  std::string redirects = "0";
  std::string tee = "0";
  std::string events_path;              // JSON lines of the agent's events, when set
  bool no_python = false;
  bool module = false;
  bool run_path = false;                // python -u -c runpy.run_path(SCRIPT), as torchrun's in-interpreter run
  std::string start_method = "spawn";   // checked, no effect: workers are processes (launch_flags.h)
  uint32_t node_rank = 0;               // static: this agent's group rank
  std::string master_addr = "127.0.0.1";  // static: where node_rank 0 serves the store
  uint32_t master_port = 29500;         // static
  // The workers' interpreter: --python, else DAGSIM_PYTHON, else torchrun's PYTHON_EXEC, else
  // python3 from PATH (torchrun runs sys.executable; dagsim is not Python).
  std::string python = "python3";
  double stop_grace_s = 30;             // SIGTERM to SIGKILL, as torchrun's
  std::vector<std::string> command;     // the training script (or program) and its arguments
};

}  // namespace dagsim::launch
