// LaunchPlan (launch_plan.h): torchrun's flags, checked, into the launch's parts.
#include "launch/launch_plan.h"

#include <unistd.h>

#include <map>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/elastic/worker_ranks.h"
#include "net/crypto.h"

namespace dagsim::launch {

namespace {

Error bad(const std::string& flag, const std::string& value, const std::string& why) {
  return errors::invalid_argument(flag + " " + quote(value) + ": " + why);
}

// A whole number in [lo, hi], all digits.
std::optional<uint64_t> whole(const std::string& text, uint64_t lo, uint64_t hi) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const uint64_t v = std::stoull(text);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

void parse_nnodes(const std::string& text, rendezvous::RendezvousSettings& settings) {
  const size_t colon = text.find(':');
  const auto min = whole(text.substr(0, colon), 1, rendezvous::kMaxRendezvousNodes);
  const auto max = colon == std::string::npos ? min : whole(text.substr(colon + 1), 1, rendezvous::kMaxRendezvousNodes);
  if (!min || !max || *max < *min) {
    throw bad("--nnodes", text, "expected N or MIN:MAX with 1 <= MIN <= MAX <= " + std::to_string(rendezvous::kMaxRendezvousNodes));
  }
  settings.min_nodes = static_cast<uint32_t>(*min);
  settings.max_nodes = static_cast<uint32_t>(*max);
}

uint32_t parse_nproc(const std::string& text, uint32_t cores) {
  if (text == "auto" || text == "cpu") return cores;
  if (text == "gpu") throw bad("--nproc_per_node", text, "there are no GPUs for dagsim launch to count: give a number");
  const auto n = whole(text, 1, elastic::kMaxLocalWorldSize);
  if (!n) throw bad("--nproc_per_node", text, "expected a number from 1 to " + std::to_string(elastic::kMaxLocalWorldSize) + ", auto or cpu");
  return static_cast<uint32_t>(*n);
}

// --rdzv_conf keys some backend reads; others are warned of, as torchrun's handlers ignore them.
bool known_conf_key(const std::string& key) {
  static const char* const known[] = {"join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout",
                                      "keep_alive_interval", "keep_alive_max_attempt", "read_timeout", "is_host",
                                      "store_type", "protocol", "ssl_cert", "ssl_cert_key", "ca_cert", "rank", "timeout"};
  for (const char* k : known) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace

LaunchPlan plan_launch(const LaunchArgs& args, uint32_t cores) {
  LaunchPlan plan;
  parse_nnodes(args.nnodes, plan.settings);
  plan.agent.local_world_size = parse_nproc(args.nproc_per_node, cores);
  plan.agent.max_restarts = args.max_restarts;
  if (!(args.monitor_interval_s > 0) || args.monitor_interval_s > 3600) {
    throw bad("--monitor_interval", std::to_string(args.monitor_interval_s), "must be more than 0 and at most 3600 seconds");
  }
  plan.agent.monitor_interval = std::chrono::duration_cast<runtime::Duration>(std::chrono::duration<double>(args.monitor_interval_s));
  if (args.role.empty() || args.role.size() > elastic::kMaxRoleBytes || args.role.find_first_of(" \n\t") != std::string::npos) {
    throw bad("--role", args.role, "must be one word of at most 256 characters");
  }
  plan.agent.role = args.role;
  if (!(args.stop_grace_s >= 0) || args.stop_grace_s > 3600) throw bad("--stop-grace", std::to_string(args.stop_grace_s), "0 to 3600 seconds");
  plan.grace = std::chrono::duration_cast<runtime::Duration>(std::chrono::duration<double>(args.stop_grace_s));
  std::string backend = args.rdzv_backend;
  std::string endpoint = args.rdzv_endpoint;
  std::string run_id = args.rdzv_id;
  std::map<std::string, std::string> conf;
  try {
    conf = rendezvous::parse_rendezvous_config(args.rdzv_conf);
  } catch (const Error& e) {
    throw bad("--rdzv_conf", args.rdzv_conf, e.detail());
  }
  if (args.standalone) {
    backend = "c10d";
    endpoint = "localhost:0";
    conf["is_host"] = "true";
    const std::vector<uint8_t> id = net::random_bytes(16);
    static const char* hex = "0123456789abcdef";
    run_id.clear();
    for (uint8_t b : id) run_id += {hex[b >> 4], hex[b & 15]};
  }
  // The run id names this agent's log folder, <log_dir>/<id>_<random>, as torchrun's mkdtemp
  // prefix does: a '/' would put the folder elsewhere ("../../x" above the log folder, "/etc/x"
  // anywhere). torchrun writes where such an id points; it is refused here, before any folder is
  // made. Any other byte is kept (the id is also the store's key prefix, which other agents,
  // torchrun's included, must share), and printed escaped.
  if (run_id.find('/') != std::string::npos || run_id.find('\0') != std::string::npos) {
    throw bad("--rdzv_id", run_id, "the run id names the log folder (<log_dir>/<id>_<random>) and cannot hold a '/'");
  }
  if (backend == "static") {
    // torchrun's static backend (net/rdzv/static_rendezvous.h): each check here names the flag.
    if (plan.settings.min_nodes != plan.settings.max_nodes) {
      throw bad("--nnodes", args.nnodes, "the static backend (torchrun's default) takes a fixed N; for MIN:MAX use --rdzv_backend c10d");
    }
    if (args.node_rank >= plan.settings.max_nodes) {
      throw bad("--node_rank", std::to_string(args.node_rank), "must be from 0 to " + std::to_string(plan.settings.max_nodes - 1) +
                                                                  " (--nnodes " + std::to_string(plan.settings.max_nodes) + ")");
    }
    if (endpoint.empty()) {
      if (args.master_port == 0) throw bad("--master_port", "0", "node rank 0 would serve a port the other agents cannot know");
      endpoint = args.master_addr + ":" + std::to_string(args.master_port);  // torchrun's get_rdzv_endpoint
    }
    conf["rank"] = std::to_string(args.node_rank);
  } else {
    // torchrun reads these for the static backend only, and ignores them otherwise; said, not silent.
    const LaunchArgs defaults;
    if (args.node_rank != defaults.node_rank || args.master_addr != defaults.master_addr || args.master_port != defaults.master_port) {
      plan.warnings.push_back("--node_rank, --master_addr and --master_port are read by the static backend only; " + backend +
                              " ranks agents in the order it forms them");
    }
  }
  for (const auto& [key, value] : conf) {
    if (key == "rank" && backend != "static") plan.warnings.push_back("--rdzv_conf \"rank\" is read by the static backend only");
    if (key == "timeout" && backend != "static") plan.warnings.push_back("--rdzv_conf \"timeout\" is read by the static backend only");
    if (!known_conf_key(key)) plan.warnings.push_back("--rdzv_conf " + quote(key) + " is not used by dagsim launch");
  }
  plan.params.emplace(backend.empty() ? "c10d" : backend, endpoint, run_id, plan.settings.min_nodes,
                      plan.settings.max_nodes, std::move(conf));
  // Each check names the flag its value came from.
  try {
    plan.target = net::check_rendezvous_parameters(*plan.params);
  } catch (const Error& e) {
    const std::string& what = e.detail();
    if (what.rfind("The rendezvous backend", 0) == 0) throw bad("--rdzv_backend", backend, what);
    if (backend == "static" && args.rdzv_endpoint.empty() && what.find("ndpoint") != std::string::npos) {
      throw bad("--master_addr/--master_port", endpoint, what);
    }
    if (what.find("rendezvous endpoint") != std::string::npos) throw bad("--rdzv_endpoint", endpoint, what);
    throw bad("--rdzv_conf", args.rdzv_conf, what);
  }
  try {
    plan.settings = rendezvous::settings_from_parameters(*plan.params);
  } catch (const Error& e) {
    const bool about_id = e.detail().find("run id") != std::string::npos;
    throw bad(about_id ? "--rdzv_id" : "--rdzv_conf", about_id ? run_id : args.rdzv_conf, e.detail());
  }
  if (args.command.empty()) throw errors::invalid_argument("dagsim launch needs the training script (or, with --no_python, the program) to run");
  if (backend == "static") {
    // The workers' master is the agents' store (PyTorch's _get_addr_and_port for static).
    plan.static_master = plan.target.endpoint;
    plan.agent.use_agent_store = true;
  }
  if (args.run_path) {
    // torchrun's run_script_path in a worker process of its own: the script runs as __main__ with
    // sys.argv = SCRIPT ARGS. It wins over --no_python and --module, as torchrun's does.
    plan.argv = {args.python, "-u", "-c", std::string(kRunPathCode)};
  } else {
    if (args.no_python && args.module) throw errors::invalid_argument("--no_python and --module cannot be used together");
    if (!args.no_python) {
      plan.argv = {args.python, "-u"};
      if (args.module) plan.argv.push_back("-m");
    }
  }
  plan.argv.insert(plan.argv.end(), args.command.begin(), args.command.end());
  plan.redirects = net::parse_std_streams("--redirects", args.redirects);
  plan.tee = net::parse_std_streams("--tee", args.tee);
  plan.log_dir = args.log_dir;
  return plan;
}

}  // namespace dagsim::launch
