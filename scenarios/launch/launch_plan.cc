// LaunchPlan (launch_plan.h): torchrun's flags, checked, into the launch's parts.
#include "scenarios/launch/launch_plan.h"

#include <unistd.h>

#include <cmath>
#include <map>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/crypto.h"

namespace dagsim::launch {

namespace {

constexpr uint16_t kC10dDefaultPort = 29400;  // torchrun's
constexpr uint16_t kEtcdDefaultPort = 2379;

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

// Positive seconds, whole or decimal, at most a day... a year.
std::optional<runtime::Duration> seconds(const std::string& text) {
  if (text.empty() || text.size() > 24 || text.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(s > 0) || s > 365.0 * 24 * 3600) return std::nullopt;
  return std::chrono::duration_cast<runtime::Duration>(std::chrono::duration<double>(s));
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

std::optional<bool> parse_bool(const std::string& text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "1" || lower == "true" || lower == "t" || lower == "yes" || lower == "y") return true;
  if (lower == "0" || lower == "false" || lower == "f" || lower == "no" || lower == "n") return false;
  return std::nullopt;
}

void parse_endpoint(const std::string& text, uint16_t default_port, LaunchPlan& plan) {
  if (text.empty()) throw bad("--rdzv_endpoint", text, "a rendezvous needs HOST[:PORT] (or --standalone)");
  std::string host = text;
  std::string port;
  if (text.front() == '[') {  // [IPv6]:port
    const size_t close = text.find(']');
    if (close == std::string::npos) throw bad("--rdzv_endpoint", text, "an IPv6 address needs its closing ]");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw bad("--rdzv_endpoint", text, "expected [HOST]:PORT");
      port = text.substr(close + 2);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) throw bad("--rdzv_endpoint", text, "no host");
  plan.host = host;
  plan.port = default_port;
  if (!port.empty()) {
    const auto p = whole(port, 1, 65535);
    if (!p) throw bad("--rdzv_endpoint", text, "the port must be 1 to 65535");
    plan.port = static_cast<uint16_t>(*p);
  }
}

void apply_conf(const std::string& text, LaunchPlan& plan) {
  std::map<std::string, std::string> conf;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw bad("--rdzv_conf", text, quote(item) + " is not KEY=VALUE");
    conf[item.substr(0, eq)] = item.substr(eq + 1);
    begin = end + 1;
  }
  rendezvous::RendezvousSettings& s = plan.settings;
  const auto duration = [&](const std::string& key, runtime::Duration& into) {
    const auto it = conf.find(key);
    if (it == conf.end()) return;
    const auto d = seconds(it->second);
    if (!d) throw bad("--rdzv_conf", text, key + " must be a positive number of seconds");
    into = *d;
    conf.erase(it);
  };
  duration("join_timeout", s.timeout.join);
  duration("last_call_timeout", s.timeout.last_call);
  duration("close_timeout", s.timeout.close);
  duration("heartbeat_timeout", s.timeout.heartbeat);
  duration("keep_alive_interval", s.keep_alive_interval);
  duration("read_timeout", plan.read_timeout);
  if (auto it = conf.find("keep_alive_max_attempt"); it != conf.end()) {
    const auto n = whole(it->second, 1, 1000);
    if (!n) throw bad("--rdzv_conf", text, "keep_alive_max_attempt must be 1 to 1000");
    s.keep_alive_max_attempt = static_cast<uint32_t>(*n);
    conf.erase(it);
  }
  if (auto it = conf.find("is_host"); it != conf.end()) {
    plan.is_host = parse_bool(it->second);
    if (!plan.is_host) throw bad("--rdzv_conf", text, "is_host must be true or false");
    conf.erase(it);
  }
  if (auto it = conf.find("store_type"); it != conf.end()) {
    std::string lower;
    for (char c : it->second) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "file") throw bad("--rdzv_conf", text, "store_type file is not supported by dagsim launch; use tcp");
    if (lower != "tcp") throw bad("--rdzv_conf", text, "Invalid store type given. Currently only supports file and tcp.");
    conf.erase(it);
  }
  // torchrun passes the rest to its handler, which ignores what it does not know; say so.
  for (const auto& [key, value] : conf) plan.warnings.push_back("--rdzv_conf " + quote(key) + " is not used by dagsim launch");
}

}  // namespace

bool names_this_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return false;
  const std::string own(name);
  return host == own || (host.size() > own.size() && host.rfind(own + ".", 0) == 0);
}

LaunchPlan plan_launch(const cli::LaunchArgs& args, uint32_t cores) {
  LaunchPlan plan;
  parse_nnodes(args.nnodes, plan.settings);
  plan.agent.local_world_size = parse_nproc(args.nproc_per_node, cores);
  plan.agent.max_restarts = args.max_restarts;
  if (!(args.monitor_interval_s > 0) || args.monitor_interval_s > 3600) {
    throw bad("--monitor_interval", std::to_string(args.monitor_interval_s), "must be more than 0 and at most 3600 seconds");
  }
  plan.agent.monitor_interval = std::chrono::duration_cast<runtime::Duration>(std::chrono::duration<double>(args.monitor_interval_s));
  if (args.role.empty() || args.role.size() > 256 || args.role.find_first_of(" \n\t") != std::string::npos) {
    throw bad("--role", args.role, "must be one word of at most 256 characters");
  }
  plan.agent.role = args.role;
  if (!(args.stop_grace_s >= 0) || args.stop_grace_s > 3600) throw bad("--stop-grace", std::to_string(args.stop_grace_s), "0 to 3600 seconds");
  plan.grace = std::chrono::duration_cast<runtime::Duration>(std::chrono::duration<double>(args.stop_grace_s));
  std::string backend = args.rdzv_backend;
  std::string run_id = args.rdzv_id;
  if (args.standalone) {
    backend = "c10d";
    plan.host = "localhost";
    plan.port = 0;
    plan.is_host = true;
    const std::vector<uint8_t> id = net::random_bytes(16);
    static const char* hex = "0123456789abcdef";
    run_id.clear();
    for (uint8_t b : id) run_id += {hex[b >> 4], hex[b & 15]};
  }
  if (backend == "c10d" || backend == "dagsim") {
    plan.store = StoreKind::tcp_store;
    if (!args.standalone) parse_endpoint(args.rdzv_endpoint, kC10dDefaultPort, plan);
  } else if (backend == "etcd" || backend == "etcd-v2") {
    plan.store = StoreKind::etcd;
    parse_endpoint(args.rdzv_endpoint, kEtcdDefaultPort, plan);
  } else if (backend == "static") {
    throw bad("--rdzv_backend", backend,
              "torchrun's static rendezvous (--master_addr, --node_rank) is not supported by dagsim launch; use "
              "--rdzv_backend c10d --rdzv_endpoint HOST:PORT, or --standalone for one node");
  } else {
    throw bad("--rdzv_backend", backend, "expected c10d, dagsim, etcd or etcd-v2");
  }
  plan.settings.run_id = run_id;
  apply_conf(args.rdzv_conf, plan);
  rendezvous::validate(plan.settings);
  if (args.command.empty()) throw errors::invalid_argument("dagsim launch needs the training script (or, with --no_python, the program) to run");
  if (args.no_python && args.module) throw errors::invalid_argument("--no_python and --module cannot be used together");
  if (!args.no_python) {
    plan.argv = {"python3", "-u"};
    if (args.module) plan.argv.push_back("-m");
  }
  plan.argv.insert(plan.argv.end(), args.command.begin(), args.command.end());
  plan.redirects = net::parse_std_streams("--redirects", args.redirects);
  plan.tee = net::parse_std_streams("--tee", args.tee);
  plan.log_dir = args.log_dir;
  return plan;
}

}  // namespace dagsim::launch
