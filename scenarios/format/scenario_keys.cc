#include "scenarios/format/scenario_keys.h"

#include <algorithm>
#include <tuple>

namespace dagsim::scenarios {
namespace {

// Constructed on first use, so registrations from any file's static initialisation find it.
std::vector<KeySet>& registry() {
  static std::vector<KeySet> sets;
  return sets;
}

}  // namespace

KeySetRegistration::KeySetRegistration(KeySet set) { registry().push_back(set); }

std::vector<KeySet> scenario_key_sets() {
  std::vector<KeySet> sets = registry();
  std::sort(sets.begin(), sets.end(), [](const KeySet& a, const KeySet& b) {
    return std::tie(a.section, a.table, a.variant) < std::tie(b.section, b.table, b.variant);
  });
  return sets;
}

}  // namespace dagsim::scenarios
