#include "conformance/scenario_gen.h"

#include <cstdlib>
#include <sstream>

namespace dagsim::conformance {

using namespace std::chrono_literals;
using runtime::Duration;
using scenarios::CheckSpec;
using scenarios::FaultSpec;
using scenarios::Scenario;
using runtime::LatencyModel;

namespace {

Duration ms(int64_t v) { return std::chrono::milliseconds(v); }
Duration us(int64_t v) { return std::chrono::microseconds(v); }

rc::Gen<LatencyModel> gen_latency(Duration cap) {
  const int64_t cap_us = std::max<int64_t>(2, cap.count() / 1000);
  return rc::gen::mapcat(rc::gen::inRange(0, 4), [cap_us](int dist) -> rc::Gen<LatencyModel> {
    return rc::gen::map(rc::gen::tuple(rc::gen::inRange<int64_t>(1, cap_us), rc::gen::inRange<int64_t>(1, cap_us)),
                        [dist](std::tuple<int64_t, int64_t> t) {
                          const int64_t lo = std::min(std::get<0>(t), std::get<1>(t));
                          const int64_t hi = std::max(std::get<0>(t), std::get<1>(t));
                          switch (dist) {
                            case 0: return LatencyModel::constant(us(hi));
                            case 1: return LatencyModel::uniform(us(lo), us(hi));
                            case 2: return LatencyModel{LatencyModel::Dist::exponential, us(0), us(hi), us(std::max<int64_t>(1, lo)), Duration{0}};
                            default: return LatencyModel{LatencyModel::Dist::normal, us(0), us(hi), us((lo + hi) / 2), us(hi - lo + 1)};
                          }
                        });
  });
}

rc::Gen<FaultSpec> gen_fault(uint32_t nodes, uint32_t monitor, Duration duration, bool fault_monitor) {
  const int64_t end_ms = duration.count() / 1000000;
  return rc::gen::exec([=] {
    FaultSpec f;
    const int kind = *rc::gen::inRange(0, 5);
    f.at = ms(*rc::gen::inRange<int64_t>(0, end_ms));
    const int64_t lasts = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(2, end_ms / 3));
    f.until = f.at + ms(lasts);
    uint32_t node = *rc::gen::inRange<uint32_t>(0, nodes);
    if (!fault_monitor && node == monitor) node = (node + 1) % nodes;
    f.node = node;
    switch (kind) {
      case 0: f.kind = FaultSpec::Kind::kill; break;
      case 1: f.kind = FaultSpec::Kind::crash; break;
      case 2: f.kind = FaultSpec::Kind::pause; break;
      case 3:  // symmetric: isolate the node
        f.kind = FaultSpec::Kind::partition;
        f.groups = {{node}, {}};
        for (uint32_t other = 0; other < nodes; ++other) {
          if (other != node) f.groups[1].push_back(other);
        }
        break;
      default:  // one-way: the node's traffic to the monitor
        f.kind = FaultSpec::Kind::partition;
        if (node == monitor) node = (node + 1) % nodes;
        f.node = node;
        f.from = {node};
        f.to = {monitor};
        break;
    }
    return f;
  });
}

}  // namespace

rc::Gen<Scenario> gen_heartbeat_scenario(GenOptions options) {
  return rc::gen::exec([options] {
    Scenario s;
    s.name = "generated";
    s.schedule = *rc::gen::element(scenarios::Schedule::fifo, scenarios::Schedule::random);
    s.cluster.nodes = *rc::gen::inRange<uint32_t>(2, 8);
    s.cluster.clock_skew_max = ms(*rc::gen::inRange<int64_t>(0, 100));
    s.cluster.clock_drift_max_ppm = *rc::gen::inRange<int64_t>(0, 500);
    scenarios::HeartbeatSpec hb;
    hb.monitor = *rc::gen::inRange<uint32_t>(0, s.cluster.nodes);
    hb.interval = ms(*rc::gen::inRange<int64_t>(20, 200));
    hb.max_attempts = *rc::gen::inRange<uint32_t>(2, 6);
    hb.duration = ms(*rc::gen::inRange<int64_t>(1000, 15000));
    s.workload = scenarios::WorkloadSpec("heartbeat", hb);
    s.max_virtual_time = hb.duration + ms(1000);
    // Latency: under the slack (minus room for drift and serialisation), or anything up to 2× it.
    const Duration slack = hb.slack();
    const Duration cap = options.latency_within_slack ? slack / 2 : slack * 2;
    s.network.latency = *gen_latency(cap);
    if (*rc::gen::inRange(0, 3) == 0) s.network.bandwidth_bytes_per_s = 1e6 * *rc::gen::inRange(1, 100);
    if (options.lossy && *rc::gen::inRange(0, 3) == 0) s.network.connection_failure_rate = *rc::gen::inRange(1, 20) / 1000.0;
    s.network.connection_timeout = ms(*rc::gen::inRange<int64_t>(100, 3000));
    s.faults = *rc::gen::container<std::vector<FaultSpec>>(
        static_cast<size_t>(*rc::gen::inRange(0, 7)),
        gen_fault(s.cluster.nodes, hb.monitor, hb.duration, options.fault_monitor));
    std::stable_sort(s.faults.begin(), s.faults.end(), [](const FaultSpec& a, const FaultSpec& b) { return a.at < b.at; });
    if (options.lossy && *rc::gen::inRange(0, 4) == 0) {
      s.random_faults.kill_per_min = *rc::gen::inRange(0, 10);
      s.random_faults.partition_per_min = *rc::gen::inRange(0, 10);
      s.random_faults.pause_per_min = *rc::gen::inRange(0, 10);
      s.random_faults.max_concurrent = *rc::gen::inRange<uint32_t>(1, s.cluster.nodes + 1);
    }
    for (const char* kind : {"detects_failures", "no_false_suspicion", "partition_detected_after_start"}) {
      s.checks.push_back(CheckSpec{kind, {}, std::nullopt, std::nullopt, 0});
    }
    return s;
  });
}

namespace {
std::string node_list(const Scenario& s, const std::vector<uint32_t>& nodes) {
  std::string out = "[";
  for (size_t i = 0; i < nodes.size(); ++i) out += (i ? ", \"" : "\"") + s.cluster.node_name(nodes[i]) + "\"";
  return out + "]";
}
double as_ms(Duration d) { return static_cast<double>(d.count()) / 1e6; }
double as_us(Duration d) { return static_cast<double>(d.count()) / 1e3; }
}  // namespace

std::string to_toml(const Scenario& s) {
  std::ostringstream out;
  out.precision(17);
  out << "name = \"" << s.name << "\"\n";
  out << "schedule = \"" << (s.schedule == scenarios::Schedule::random ? "random" : "fifo") << "\"\n";
  out << "max_virtual_time_ms = " << as_ms(s.max_virtual_time) << "\n\n[cluster]\nnodes = " << s.cluster.nodes
      << "\nclock_skew_max_ms = " << as_ms(s.cluster.clock_skew_max) << "\nclock_drift_max_ppm = " << s.cluster.clock_drift_max_ppm
      << "\n\n[network]\n";
  const LatencyModel& l = s.network.latency;
  switch (l.dist) {
    case LatencyModel::Dist::constant: out << "latency = { dist = \"constant\", us = " << as_us(l.max) << " }\n"; break;
    case LatencyModel::Dist::uniform:
      out << "latency = { dist = \"uniform\", min_us = " << as_us(l.min) << ", max_us = " << as_us(l.max) << " }\n";
      break;
    case LatencyModel::Dist::exponential:
      out << "latency = { dist = \"exponential\", mean_us = " << as_us(l.mean) << ", min_us = " << as_us(l.min)
          << ", max_us = " << as_us(l.max) << " }\n";
      break;
    case LatencyModel::Dist::normal:
      out << "latency = { dist = \"normal\", mean_us = " << as_us(l.mean) << ", stddev_us = " << as_us(l.stddev)
          << ", min_us = " << as_us(l.min) << ", max_us = " << as_us(l.max) << " }\n";
      break;
  }
  out << "bandwidth_mbps = " << s.network.bandwidth_bytes_per_s * 8 / 1e6 << "\nconnection_failure_rate = "
      << s.network.connection_failure_rate << "\nconnection_timeout_ms = " << as_ms(s.network.connection_timeout) << "\n";
  for (const FaultSpec& f : s.faults) {
    out << "\n[[faults]]\nat_ms = " << as_ms(f.at) << "\n";
    switch (f.kind) {
      case FaultSpec::Kind::partition:
        out << "kind = \"partition\"\n";
        if (!f.groups.empty()) {
          out << "groups = [";
          for (size_t g = 0; g < f.groups.size(); ++g) out << (g ? ", " : "") << node_list(s, f.groups[g]);
          out << "]\n";
        } else {
          out << "from = " << node_list(s, f.from) << "\nto = " << node_list(s, f.to) << "\n";
        }
        if (f.until) out << "heal_at_ms = " << as_ms(*f.until) << "\n";
        break;
      case FaultSpec::Kind::heal: out << "kind = \"heal\"\n"; break;
      default: {
        const char* names[] = {"kill", "crash", "restart", "pause", "resume"};
        out << "kind = \"" << names[static_cast<int>(f.kind)] << "\"\nnode = \"" << s.cluster.node_name(f.node) << "\"\n";
        if (f.until && (f.kind == FaultSpec::Kind::kill || f.kind == FaultSpec::Kind::crash)) {
          out << "restart_at_ms = " << as_ms(*f.until) << "\n";
        }
        if (f.until && f.kind == FaultSpec::Kind::pause) out << "resume_at_ms = " << as_ms(*f.until) << "\n";
      }
    }
  }
  const scenarios::RandomFaultSpec& r = s.random_faults;
  if (r.any()) {
    out << "\n[random_faults]\nkill_per_min = " << r.kill_per_min << "\ncrash_per_min = " << r.crash_per_min
        << "\npause_per_min = " << r.pause_per_min << "\npartition_per_min = " << r.partition_per_min
        << "\nmax_concurrent = " << r.max_concurrent << "\n";
  }
  const scenarios::HeartbeatSpec& hb = s.workload.as<scenarios::HeartbeatSpec>();
  out << "\n[heartbeat]\nmonitor = \"" << s.cluster.node_name(hb.monitor) << "\"\ninterval_ms = " << as_ms(hb.interval)
      << "\nmax_attempts = " << hb.max_attempts << "\nduration_ms = " << as_ms(hb.duration)
      << "\nmessage_bytes = " << hb.message_bytes << "\n";
  for (const CheckSpec& c : s.checks) {
    out << "\n[[checks]]\nkind = \"" << c.kind << "\"\n";
    if (!c.nodes.empty()) out << "nodes = " << node_list(s, c.nodes) << "\n";
  }
  return out.str();
}

int seeds_from_env(int fallback) {
  const char* text = std::getenv("DAGSIM_SEEDS");
  if (text == nullptr) return fallback;
  const int n = std::atoi(text);
  return n > 0 ? n : fallback;
}

}  // namespace dagsim::conformance
