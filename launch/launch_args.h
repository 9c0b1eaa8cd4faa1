// LaunchArgs: the flags of `dagsim launch`, torchrun's interface on dagsim's elastic agent
// (docs/cli.md, docs/torchrun.md), as data. The CLI (scenarios/cli/main.cc) fills them from the
// command line: torchrun's spellings (--nproc_per_node and --nproc-per-node) and PET_<FLAG>
// environment variables, as torchrun's do. plan_launch (launch_plan.h) checks them; the Launcher
// (launcher.h) runs them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dagsim::launch {

struct LaunchArgs {
  std::string nnodes = "1:1";           // N or MIN:MAX
  std::string nproc_per_node = "1";     // a number, or auto/cpu (the cores here); gpu is refused
  std::string rdzv_backend = "static";  // torchrun 1.13's default, refused with a hint
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
  double stop_grace_s = 30;             // SIGTERM to SIGKILL, as torchrun's
  std::vector<std::string> command;     // the training script (or program) and its arguments
};

}  // namespace dagsim::launch
