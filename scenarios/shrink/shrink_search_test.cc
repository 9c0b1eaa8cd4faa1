// The search (shrink_search.h) against a synthetic world: a "run" that fails check "b" whenever a
// fault strikes worker3 before the run's end, and lasts max_virtual_time_ms. No process is started.
#include "scenarios/shrink/shrink_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "scenarios/shrink/toml_edits.h"

namespace dagsim::shrink {
namespace {

std::string scenario() {
  std::string text = "name = \"synthetic\"\nmax_virtual_time_ms = 60000\n\n[cluster]\nnodes = 4\n";
  for (int i = 0; i < 24; ++i) {
    text += "\n[[faults]]\nkind = \"kill\"\nnode = \"worker" + std::to_string(i % 4) + "\"\nat_ms = " +
            std::to_string(2000 * i + 1500) + "\nrestart_at_ms = " + std::to_string(2000 * i + 2200) + "\n";
  }
  text += "\n[[checks]]\nkind = \"a\"\n\n[[checks]]\nkind = \"b\"\n";
  return text;
}

// Whether a run of `root` that ends at `end` fails check "b" (given it checks "b").
using Fails = std::function<bool(const toml::table& root, double end)>;

// The first world's rule: a fault strikes worker3 before the run's end.
bool worker3_struck(const toml::table& root, double end) {
  bool hit = false;
  if (const toml::array* faults = root["faults"].as_array()) {
    for (const toml::node& f : *faults) {
      hit = hit || (f.as_table()->at("node").value<std::string>() == "worker3" && *f.as_table()->at("at_ms").value<double>() < end);
    }
  }
  return hit;
}

struct World {
  uint64_t runs = 0;
  SearchEnv env;

  explicit World(Fails fails = worker3_struck) {
    env.validate = [](const std::string& text) -> std::optional<uint32_t> {
      const toml::table root = parse_toml(text, "candidate");
      const std::optional<int64_t> end = root["max_virtual_time_ms"].value<int64_t>();
      const std::optional<int64_t> nodes = root["cluster"]["nodes"].value<int64_t>();
      if (!end || *end <= 0 || !nodes || *nodes < 1) return std::nullopt;
      const toml::array* checks = root["checks"].as_array();
      if (checks == nullptr || checks->empty()) return std::nullopt;  // a scenario checks something
      for (const toml::node& c : *checks) {
        if (!c.is_table() || !(*c.as_table())["kind"].value<std::string>()) return std::nullopt;
      }
      if (const toml::array* faults = root["faults"].as_array()) {
        for (const toml::node& f : *faults) {
          if (!f.is_table() || !(*f.as_table())["kind"].value<std::string>()) return std::nullopt;
          const std::optional<double> at = (*f.as_table())["at_ms"].value<double>();
          const toml::node* until = f.as_table()->get("restart_at_ms");
          if (!at || *at > static_cast<double>(*end)) return std::nullopt;
          const std::string node = (*f.as_table())["node"].value<std::string>().value_or("");
          if (node.size() != 7 || node.compare(0, 6, "worker") != 0 || node[6] - '0' >= *nodes) return std::nullopt;
          if (until != nullptr && !(until->value<double>() > *at)) return std::nullopt;
        }
      }
      return static_cast<uint32_t>(*nodes);
    };
    env.run = [this, fails](const std::string& text) {
      ++runs;
      const toml::table root = parse_toml(text, "candidate");
      const double end = static_cast<double>(*root["max_virtual_time_ms"].value<int64_t>());
      RunOutcome run;
      run.virtual_time_ms = end;
      run.outcome = "finished";
      run.faults = nlohmann::json::array();
      if (const toml::array* faults = root["faults"].as_array()) {
        for (size_t i = 0; i < faults->size(); ++i) run.faults.push_back({{"kind", "kill"}});
      }
      bool hit = fails(root, end);
      bool checked = false;
      for (const toml::node& c : *root["checks"].as_array()) checked = checked || c.as_table()->at("kind").value<std::string>() == "b";
      hit = hit && checked;
      run.exit_code = hit ? 1 : 0;
      if (hit) run.failed_checks = {"b"};
      return run;
    };
  }
};

FailureSignature check_b() {
  FailureSignature s;
  s.check = "b";
  s.outcome = "finished";
  return s;
}

TEST(ShrinkSearch, ShrinksToOneEarlyFaultAndTheFailingCheck) {
  World world;
  const RunOutcome original = world.env.run(scenario());
  world.runs = 0;
  std::vector<std::string> progress;
  SearchOptions options;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  const SearchResult r = shrink_search(scenario(), original, check_b(), world.env, options);
  EXPECT_EQ(r.stopped_by, "fixpoint");
  EXPECT_EQ(r.runs, world.runs);
  EXPECT_EQ(r.before.faults, 24u);
  EXPECT_EQ(r.after.faults, 1u);
  ASSERT_TRUE(r.after.virtual_time_ms.has_value());
  EXPECT_LE(*r.after.virtual_time_ms, 2);  // the one fault at 0, the run as short as stays valid
  const toml::table out = parse_toml(r.text, "out");
  ASSERT_NE(out["faults"].as_array(), nullptr) << r.text;
  ASSERT_NE(out["checks"].as_array(), nullptr) << r.text;
  EXPECT_EQ(out["faults"][0]["node"].value<std::string>(), "worker3");
  EXPECT_EQ(out["faults"][0]["at_ms"].value<int64_t>(), 0);
  ASSERT_EQ(out["checks"].as_array()->size(), 1u);
  EXPECT_EQ(out["checks"][0]["kind"].value<std::string>(), "b");
  EXPECT_EQ(out["cluster"]["nodes"].value<int64_t>(), 4);  // worker3 needs four nodes
  EXPECT_FALSE(progress.empty());
  EXPECT_NE(progress.front().find("faults 24 -> "), std::string::npos) << progress.front();
  EXPECT_LT(r.runs, 150u);

}

TEST(ShrinkSearch, DeterministicAndBoundedByMaxRuns) {
  World a;
  World b;
  const RunOutcome original = a.env.run(scenario());
  const SearchResult first = shrink_search(scenario(), original, check_b(), a.env, {});
  const SearchResult second = shrink_search(scenario(), original, check_b(), b.env, {});
  EXPECT_EQ(first.text, second.text);
  EXPECT_EQ(first.runs, second.runs);

  World c;
  SearchOptions few;
  few.max_runs = 5;
  const SearchResult cut = shrink_search(scenario(), original, check_b(), c.env, few);
  EXPECT_EQ(cut.stopped_by, "max_runs");
  EXPECT_EQ(cut.runs, 5u);
  EXPECT_EQ(c.runs, 5u);

  World d;
  SearchOptions timed;
  timed.out_of_time = [] { return true; };
  const SearchResult none = shrink_search(scenario(), original, check_b(), d.env, timed);
  EXPECT_EQ(none.stopped_by, "max_wall_time");
  EXPECT_EQ(none.text, scenario());
}

// The start of the first fault on `node` (nullopt when none), and that fault.
const toml::table* fault_on(const toml::table& root, const std::string& node) {
  if (const toml::array* faults = root["faults"].as_array()) {
    for (const toml::node& f : *faults) {
      if (f.as_table()->at("node").value<std::string>() == node) return f.as_table();
    }
  }
  return nullptr;
}

std::string timed_scenario(const std::vector<std::tuple<std::string, int, int>>& faults) {
  std::string text = "name = \"synthetic\"\nmax_virtual_time_ms = 15000\n\n[cluster]\nnodes = 4\n";
  for (const auto& [node, at, restart] : faults) {
    text += "\n[[faults]]\nkind = \"kill\"\nnode = \"" + node + "\"\nat_ms = " + std::to_string(at) +
            "\nrestart_at_ms = " + std::to_string(restart) + "\n";
  }
  return text + "\n[[checks]]\nkind = \"b\"\n";
}

// A fault that must land in a phase of the run (200..400 ms of each second, as a partition must
// land during a backward): 0, half and three quarters of 11300 all miss it, and so does every
// shift of the whole schedule by a fraction of the gap; only the ladder of sixteenths reaches it.
TEST(ShrinkSearch, AFaultThatMustLandInAPhaseMovesEarlierByTheLadder) {
  auto in_phase = [](const toml::table& root, double end) {
    const toml::table* f = fault_on(root, "worker3");
    if (f == nullptr) return false;
    const double at = *f->at("at_ms").value<double>();
    const double phase = std::fmod(at, 1000);
    return at < end && phase >= 200 && phase < 400;
  };
  World world(in_phase);
  const std::string text = timed_scenario({{"worker1", 3000, 3100}, {"worker3", 11300, 11400}, {"worker2", 12000, 12100}});
  const RunOutcome original = world.env.run(text);
  ASSERT_EQ(original.exit_code, 1);
  const SearchResult r = shrink_search(text, original, check_b(), world.env, {});
  EXPECT_EQ(r.stopped_by, "fixpoint");
  EXPECT_EQ(r.after.faults, 1u);
  ASSERT_TRUE(r.after.virtual_time_ms.has_value());
  EXPECT_LE(*r.after.virtual_time_ms, 15000.0 / 5) << r.text;
  const toml::table out = parse_toml(r.text, "out");
  ASSERT_NE(fault_on(out, "worker3"), nullptr) << r.text;
  EXPECT_LT(*fault_on(out, "worker3")->at("at_ms").value<double>(), 400) << r.text;
}

// Two faults that must keep their spacing (a crash exactly 225 ms after a partition) and land in a
// phase: moving either alone breaks the pair, so only moving them together (with the run's end)
// makes the run shorter.
TEST(ShrinkSearch, FaultsThatMustKeepTheirSpacingMoveEarlierTogether) {
  auto spaced = [](const toml::table& root, double end) {
    const toml::table* a = fault_on(root, "worker3");
    const toml::table* b = fault_on(root, "worker2");
    if (a == nullptr || b == nullptr) return false;
    const double at_a = *a->at("at_ms").value<double>();
    const double at_b = *b->at("at_ms").value<double>();
    const double phase = std::fmod(at_a, 1000);
    return at_b - at_a == 225 && phase >= 400 && phase < 600 && at_b < end;
  };
  World world(spaced);
  const std::string text =
      timed_scenario({{"worker1", 0, 112}, {"worker1", 6000, 6100}, {"worker3", 11450, 11451}, {"worker2", 11675, 11676}});
  const RunOutcome original = world.env.run(text);
  ASSERT_EQ(original.exit_code, 1);
  const SearchResult r = shrink_search(text, original, check_b(), world.env, {});
  EXPECT_EQ(r.stopped_by, "fixpoint");
  EXPECT_EQ(r.after.faults, 2u) << r.text;
  ASSERT_TRUE(r.after.virtual_time_ms.has_value());
  EXPECT_LE(*r.after.virtual_time_ms, 15000.0 / 5) << r.text;
  const toml::table out = parse_toml(r.text, "out");
  ASSERT_NE(fault_on(out, "worker3"), nullptr);
  ASSERT_NE(fault_on(out, "worker2"), nullptr);
  EXPECT_EQ(*fault_on(out, "worker2")->at("at_ms").value<double>() - *fault_on(out, "worker3")->at("at_ms").value<double>(), 225);
}

// A fault that must last through the run: shortening it fails, so its restart stays far past the
// shrunk run's end, where replay would warn that it never came. The search drops that end.
TEST(ShrinkSearch, AFaultsEndAfterTheRunIsDropped) {
  auto through = [](const toml::table& root, double end) {
    const toml::table* f = fault_on(root, "worker3");
    if (f == nullptr) return false;
    const std::optional<double> until = fault_end(*f);  // a restart, or a resume once milder
    return *f->at("at_ms").value<double>() < end && (!until || *until >= end + 1000);
  };
  World world(through);
  const std::string text = timed_scenario({{"worker1", 100, 200}, {"worker3", 5000, 16000}});
  const RunOutcome original = world.env.run(text);
  ASSERT_EQ(original.exit_code, 1);
  const SearchResult r = shrink_search(text, original, check_b(), world.env, {});
  EXPECT_EQ(r.stopped_by, "fixpoint");
  ASSERT_TRUE(r.after.virtual_time_ms.has_value());
  const toml::table out = parse_toml(r.text, "out");
  const toml::table* f = fault_on(out, "worker3");
  ASSERT_NE(f, nullptr) << r.text;
  const std::optional<double> until = fault_end(*f);
  EXPECT_TRUE(!until || *until < *r.after.virtual_time_ms) << r.text;
}

// A fault that must last to within 2 ms of the run's end, and must end: neither dropping its end
// nor ending it earlier keeps the failure, so the run's bound must stay past the fault's end (the
// loader warns of an end at or past it) rather than be cut to it.
TEST(ShrinkSearch, TheRunsBoundStaysPastAFaultsEnd) {
  auto nearly_through = [](const toml::table& root, double end) {
    const toml::table* f = fault_on(root, "worker3");
    if (f == nullptr) return false;
    const std::optional<double> until = fault_end(*f);
    return *f->at("at_ms").value<double>() < end && until && *until >= end - 2;
  };
  World world(nearly_through);
  const std::string text = timed_scenario({{"worker1", 100, 200}, {"worker3", 5000, 14999}});
  const RunOutcome original = world.env.run(text);
  ASSERT_EQ(original.exit_code, 1);
  const SearchResult r = shrink_search(text, original, check_b(), world.env, {});
  EXPECT_EQ(r.stopped_by, "fixpoint");
  ASSERT_TRUE(r.after.virtual_time_ms.has_value());
  EXPECT_LE(*r.after.virtual_time_ms, 15000.0 / 5) << r.text;
  const toml::table out = parse_toml(r.text, "out");
  const toml::table* f = fault_on(out, "worker3");
  ASSERT_NE(f, nullptr) << r.text;
  ASSERT_TRUE(fault_end(*f).has_value()) << r.text;
  EXPECT_LT(*fault_end(*f), *out["max_virtual_time_ms"].value<double>()) << r.text;
}

}  // namespace
}  // namespace dagsim::shrink
