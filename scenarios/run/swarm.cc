#include "scenarios/run/swarm.h"

#include <algorithm>
#include <sstream>

#include "core/base/assert.h"
#include "core/base/buggify.h"
#include "core/base/prng.h"

namespace dagsim::scenarios {
namespace {

// The swarm's own stream of the seed: not the fault schedule's (0xfa017) nor any other.
constexpr uint64_t kSwarmStream = 0x5a4a3;

// 2^(quarters / 4) for quarters in [-8, 8], exactly the same bits on any machine: a power of two
// times one of four constants.
double quarter_power_of_two(int64_t quarters) {
  static constexpr double kRoots[4] = {1.0, 1.189207115002721, 1.4142135623730951, 1.6817928305074290};
  DAGSIM_ASSERT(quarters >= -8 && quarters <= 8);
  const int64_t whole = quarters >= 0 ? quarters / 4 : -((-quarters + 3) / 4);
  const int64_t rest = quarters - whole * 4;
  DAGSIM_ASSERT(rest >= 0 && rest < 4);
  double value = kRoots[rest];
  for (int64_t i = 0; i < whole; ++i) value *= 2;
  for (int64_t i = 0; i > whole; --i) value /= 2;
  return value;
}

// Switches each of `n` candidates on with probability 1/2, at least one staying on (a random one,
// when the coin left none). Draws n + (0 or 1) numbers.
std::vector<bool> switch_some(Prng& random, size_t n) {
  std::vector<bool> on(n, false);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    on[i] = random.bernoulli(0.5);
    any = any || on[i];
  }
  if (!any && n > 0) on[random.uniform_u64(n)] = true;
  return on;
}

std::string format_factor(double f) {
  std::ostringstream out;
  out.precision(3);
  out << f;
  return out.str();
}

}  // namespace

SwarmMix draw_swarm(const Scenario& scenario, uint64_t seed) {
  const RandomFaultSpec& spec = scenario.random_faults;
  DAGSIM_ASSERT(spec.swarm);
  Prng random = Prng(seed).fork(kSwarmStream);
  SwarmMix mix;
  const std::array<double, 4> rates = {spec.kill_per_min, spec.crash_per_min, spec.pause_per_min, spec.partition_per_min};
  std::vector<size_t> candidates;
  for (size_t k = 0; k < rates.size(); ++k) {
    if (rates[k] > 0) candidates.push_back(k);
  }
  const std::vector<bool> kinds_on = switch_some(random, candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) mix.kinds[candidates[i]] = kinds_on[i];
  for (size_t k = 0; k < rates.size(); ++k) mix.rate_factors[k] = quarter_power_of_two(random.uniform_int(-8, 8));

  const uint32_t nodes = scenario.cluster.nodes;
  std::vector<uint32_t> eligible;
  for (uint32_t n = 0; n < nodes; ++n) {
    if (std::find(spec.exclude.begin(), spec.exclude.end(), n) == spec.exclude.end()) eligible.push_back(n);
  }
  const std::vector<bool> targets_on = switch_some(random, eligible.size());
  mix.targets.assign(nodes, false);
  for (size_t i = 0; i < eligible.size(); ++i) mix.targets[eligible[i]] = targets_on[i];
  mix.max_concurrent = static_cast<uint32_t>(random.uniform_int(1, std::max<uint32_t>(1, spec.max_concurrent)));

  if (scenario.buggify.enabled) {
    const std::vector<std::string> points =
        scenario.buggify.points.empty() ? buggify::all_point_names() : scenario.buggify.points;
    const std::vector<bool> on = switch_some(random, points.size());
    mix.buggify_points.emplace();
    for (size_t i = 0; i < points.size(); ++i) {
      if (on[i]) mix.buggify_points->push_back(points[i]);
    }
    std::sort(mix.buggify_points->begin(), mix.buggify_points->end());
  }
  return mix;
}

RandomFaultSpec apply_swarm(const RandomFaultSpec& spec, const SwarmMix& mix, double max_per_min) {
  RandomFaultSpec out = spec;
  double* rates[4] = {&out.kill_per_min, &out.crash_per_min, &out.pause_per_min, &out.partition_per_min};
  for (size_t k = 0; k < 4; ++k) {
    *rates[k] = mix.kinds[k] ? std::min(*rates[k] * mix.rate_factors[k], std::max(*rates[k], max_per_min)) : 0;
  }
  for (uint32_t n = 0; n < mix.targets.size(); ++n) {
    if (!mix.targets[n] && std::find(out.exclude.begin(), out.exclude.end(), n) == out.exclude.end()) out.exclude.push_back(n);
  }
  std::sort(out.exclude.begin(), out.exclude.end());
  out.max_concurrent = mix.max_concurrent;
  DAGSIM_ASSERT(out.max_concurrent >= 1 && out.max_concurrent <= std::max<uint32_t>(1, spec.max_concurrent));
  return out;
}

nlohmann::json swarm_json(const Scenario& scenario, const SwarmMix& mix) {
  const RandomFaultSpec& spec = scenario.random_faults;
  const std::array<double, 4> rates = {spec.kill_per_min, spec.crash_per_min, spec.pause_per_min, spec.partition_per_min};
  nlohmann::json kinds = nlohmann::json::object();
  std::string summary;
  for (size_t k = 0; k < 4; ++k) {
    if (rates[k] <= 0) continue;
    kinds[SwarmMix::kKinds[k]] = {{"on", mix.kinds[k]}, {"rate_factor", mix.rate_factors[k]},
                                  {"per_min", mix.kinds[k] ? rates[k] * mix.rate_factors[k] : 0.0}};
    if (mix.kinds[k]) summary += std::string(summary.empty() ? "" : ", ") + SwarmMix::kKinds[k] + " x" + format_factor(mix.rate_factors[k]);
  }
  if (summary.empty()) summary = "no fault kinds";
  nlohmann::json targets = nlohmann::json::array();
  for (uint32_t n = 0; n < mix.targets.size(); ++n) {
    if (mix.targets[n]) targets.push_back(scenario.cluster.node_name(n));
  }
  summary += "; " + std::to_string(targets.size()) + " of " + std::to_string(mix.targets.size()) +
             " nodes targeted; max_concurrent " + std::to_string(mix.max_concurrent);
  nlohmann::json out = {{"kinds", kinds}, {"targets", targets}, {"max_concurrent", mix.max_concurrent}};
  if (mix.buggify_points) {
    out["buggify_points"] = *mix.buggify_points;
    summary += "; " + std::to_string(mix.buggify_points->size()) + " buggify points on";
  }
  out["summary"] = summary;
  return out;
}

}  // namespace dagsim::scenarios
