// Benchmarks of whole scenarios through the runner, as `dagsim run` executes them: the heartbeat
// failure detector (4 nodes, 100 ms heartbeats, uniform 50..500 us latency) for 10 virtual
// minutes, with and without scheduled faults. `virtual_s_per_wall_s` is the speed-up of virtual
// over wall time (the aim: 10 virtual minutes in under 1 wall second, i.e. > 600).
#include <benchmark/benchmark.h>

#include "scenarios/run/runner.h"
#include "scenarios/workloads/heartbeat/heartbeat_spec.h"

namespace dagsim {
namespace {

using namespace std::chrono_literals;
using scenarios::FaultSpec;

scenarios::Scenario heartbeat_ten_minutes(bool with_faults) {
  scenarios::Scenario s;
  s.name = "bench_heartbeat";
  s.cluster.nodes = 4;
  s.network.latency = runtime::LatencyModel::uniform(50us, 500us);
  s.max_virtual_time = 11min;
  scenarios::HeartbeatSpec hb;
  hb.duration = 10min;
  s.workload = scenarios::WorkloadSpec("heartbeat", hb);
  if (with_faults) {
    // One outage a minute, rotating over kill, crash, pause and a partition of the workers.
    for (int minute = 0; minute < 10; ++minute) {
      FaultSpec f;
      f.at = std::chrono::minutes(minute) + 10s;
      f.until = f.at + 5s;
      f.node = 1 + minute % 3;
      const FaultSpec::Kind kinds[] = {FaultSpec::Kind::kill, FaultSpec::Kind::crash, FaultSpec::Kind::pause,
                                       FaultSpec::Kind::partition};
      f.kind = kinds[minute % 4];
      if (f.kind == FaultSpec::Kind::partition) f.groups = {{f.node}, {0}};
      s.faults.push_back(f);
    }
    for (const char* kind : {"detects_failures", "no_false_suspicion", "partition_detected_after_start"}) {
      s.checks.push_back(scenarios::CheckSpec{kind, {}, std::nullopt, std::nullopt, 0});
    }
  }
  return s;
}

void run_heartbeat(benchmark::State& state, bool with_faults) {
  const scenarios::Scenario scenario = heartbeat_ten_minutes(with_faults);
  uint64_t seed = 1;
  uint64_t messages = 0;
  for (auto _ : state) {
    scenarios::RunOptions options;
    options.seed = seed++;
    const scenarios::RunResult r = scenarios::run_scenario(scenario, options);
    if (!r.passed) {
      state.SkipWithError("the benchmark scenario failed its checks");
      return;
    }
    messages += r.messages;
  }
  const double virtual_seconds = 600.0 * static_cast<double>(state.iterations());
  state.counters["virtual_s_per_wall_s"] = benchmark::Counter(virtual_seconds, benchmark::Counter::kIsRate);
  state.counters["messages_per_s"] = benchmark::Counter(static_cast<double>(messages), benchmark::Counter::kIsRate);
}

void BM_HeartbeatScenario10Min(benchmark::State& state) { run_heartbeat(state, false); }
void BM_HeartbeatScenario10MinFaults(benchmark::State& state) { run_heartbeat(state, true); }
BENCHMARK(BM_HeartbeatScenario10Min)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HeartbeatScenario10MinFaults)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dagsim
