// The scenario format's keys, table by table, exactly as the loader accepts them. Each list the
// loader checks a table's keys against is registered here beside its definition, so the docs-drift
// test (conformance/docs_drift_test.cc) compares docs/scenarios.md with the loader itself and
// never with a second copy that could drift too.
//
// Promises: scenario_key_sets() holds every registered set once, in a fixed order (sorted), after
// static initialisation; registering is all a loader file does to be listed.
#pragma once

#include <span>
#include <string_view>
#include <vector>

namespace dagsim::scenarios {

struct KeySet {
  std::string_view section;  // the docs/scenarios.md heading that documents it: "[cluster]", "Top level"
  std::string_view table;    // a table inside that section ("when", "model.layers"); "" for its own keys
  std::string_view variant;  // for keys that depend on a value: "kind \"kill\"", "dist \"uniform\""; else ""
  std::span<const std::string_view> keys;
};

// A namespace-scope object of a loader file registers its key set during static initialisation.
struct KeySetRegistration {
  explicit KeySetRegistration(KeySet set);
};

// Every registered set, sorted by section, table and variant.
std::vector<KeySet> scenario_key_sets();

}  // namespace dagsim::scenarios
