// Benchmarks of elastic training in the simulator (issue 12 item 6): the main job's example
// (scenarios/examples/elastic_training.toml: 8 agents, 300 steps, two deaths and a late join) and
// the same job without faults, each run whole through the runner as `dagsim run` runs it.
// Counters: virtual_ms (the run's virtual time to its end, drain included), last_commit_ms (when
// the last step committed), virtual_ms_per_step (between the first and the last commit, over the
// steps between them), kill_recovery_ms and crash_recovery_ms (from the kill, and from the crash,
// to the re-formed group's first step) and rounds. The benchmark's own time is the wall time of one whole run.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "scenarios/format/scenario_loader.h"
#include "scenarios/run/runner.h"

namespace dagsim {
namespace {

std::string example_text() {
  std::ifstream in(std::string(DAGSIM_EXAMPLES) + "/elastic_training.toml");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The example without its faults and its late join: eight agents from the start.
std::string fault_free(std::string text) {
  text = text.substr(0, text.find("[[elastic.rendezvous.actions]]"));
  return text + "\n[[checks]]\nkind = \"params_match_local\"\n";
}

void run_elastic(benchmark::State& state, const std::string& text) {
  const scenarios::Scenario scenario = scenarios::parse_scenario(text, "bench_elastic.toml");
  double virtual_ms = 0, last_commit_ms = 0, per_step_ms = 0, kill_recovery_ms = 0, crash_recovery_ms = 0, rounds = 0;
  uint64_t seed = 42;
  for (auto _ : state) {
    scenarios::RunOptions options;
    options.seed = seed;
    const scenarios::RunResult r = scenarios::run_scenario(scenario, options);
    if (!r.passed) {
      state.SkipWithError("the benchmark scenario failed its checks");
      return;
    }
    const nlohmann::json& e = r.workload.at("elastic");
    virtual_ms = r.virtual_time_ms;
    last_commit_ms = e.at("last_commit_ms").get<double>();
    per_step_ms = (last_commit_ms - e.at("first_commit_ms").get<double>()) / (e.at("commits").get<double>() - 1);
    kill_recovery_ms = crash_recovery_ms = 0;
    for (const nlohmann::json& rec : e.at("recoveries")) {
      if (!rec.contains("recovery_ms")) continue;
      (rec.at("fault") == "kill" ? kill_recovery_ms : crash_recovery_ms) = rec.at("recovery_ms").get<double>();
    }
    rounds = static_cast<double>(r.workload.at("rendezvous").size());
  }
  state.counters["virtual_ms"] = virtual_ms;
  state.counters["last_commit_ms"] = last_commit_ms;
  state.counters["virtual_ms_per_step"] = per_step_ms;
  state.counters["kill_recovery_ms"] = kill_recovery_ms;
  state.counters["crash_recovery_ms"] = crash_recovery_ms;
  state.counters["rounds"] = rounds;
}

void BM_ElasticTrainingExample(benchmark::State& state) { run_elastic(state, example_text()); }
void BM_ElasticTrainingFaultFree(benchmark::State& state) { run_elastic(state, fault_free(example_text())); }
BENCHMARK(BM_ElasticTrainingExample)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ElasticTrainingFaultFree)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dagsim
