// The search (shrink_search.h) against a synthetic world: a "run" that fails check "b" whenever a
// fault strikes worker3 before the run's end, and lasts max_virtual_time_ms. No process is started.
#include "scenarios/shrink/shrink_search.h"

#include <gtest/gtest.h>

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

struct World {
  uint64_t runs = 0;
  SearchEnv env;

  World() {
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
    env.run = [this](const std::string& text) {
      ++runs;
      const toml::table root = parse_toml(text, "candidate");
      const double end = static_cast<double>(*root["max_virtual_time_ms"].value<int64_t>());
      RunOutcome run;
      run.virtual_time_ms = end;
      run.outcome = "finished";
      run.faults = nlohmann::json::array();
      bool hit = false;
      if (const toml::array* faults = root["faults"].as_array()) {
        for (const toml::node& f : *faults) {
          run.faults.push_back({{"kind", "kill"}});
          hit = hit || (f.as_table()->at("node").value<std::string>() == "worker3" &&
                        *f.as_table()->at("at_ms").value<double>() < end);
        }
      }
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

}  // namespace
}  // namespace dagsim::shrink
