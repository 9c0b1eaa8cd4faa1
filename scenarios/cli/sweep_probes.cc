// A sweep's probe table (sweep_probes.h).
#include "scenarios/cli/sweep_probes.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/base/probe.h"
#include "scenarios/cli/check_report.h"

namespace dagsim::cli {

std::vector<std::string> build_probe_names() {
  std::vector<std::string> names = probe::all_probe_names();
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

ProbeCounts probes_of_report(const nlohmann::json& report) {
  ProbeCounts out;
  const auto it = report.find("probes");
  if (it == report.end() || it->is_null()) return out;
  if (!it->is_object()) throw errors::invalid_argument("probes: expected an object of counts");
  for (const auto& [name, value] : it->items()) {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
      throw errors::invalid_argument("probes." + key_name(name) + ": expected an unsigned integer");
    }
    out[name] = value.get<uint64_t>();
  }
  return out;
}

ProbeTable probe_table(const std::vector<SeedOutcome>& outcomes, const std::vector<std::string>& known) {
  std::map<std::string, ProbeRow> rows;
  ProbeTable table;
  for (const SeedOutcome& o : outcomes) {
    if (o.interrupted) continue;
    ++table.seeds;
    for (const auto& [name, hits] : o.probes) {
      if (hits == 0) continue;
      ProbeRow& row = rows[name];
      row.name = name;
      ++row.seeds;
      row.hits = hits > std::numeric_limits<uint64_t>::max() - row.hits ? std::numeric_limits<uint64_t>::max() : row.hits + hits;
    }
  }
  for (auto& [name, row] : rows) table.hit.push_back(std::move(row));
  const std::set<std::string> names(known.begin(), known.end());
  for (const std::string& name : names) {
    if (rows.count(name) == 0) table.never_hit.push_back(name);
  }
  return table;
}

void add_probe_table(nlohmann::json& summary, const ProbeTable& table) {
  nlohmann::json probes = nlohmann::json::object();
  for (const ProbeRow& row : table.hit) probes[row.name] = {{"seeds", row.seeds}, {"hits", row.hits}};
  summary["probes"] = std::move(probes);
  summary["probes_never_hit"] = table.never_hit;
}

void print_probe_table(std::ostream& out, const ProbeTable& table) {
  const size_t all = table.hit.size() + table.never_hit.size();
  out << "probes: " << table.hit.size() << " of " << all << " hit over " << counted(table.seeds, "seed") << "\n";
  size_t width = 0;
  for (const ProbeRow& row : table.hit) width = std::max(width, printable(row.name).size());
  for (const ProbeRow& row : table.hit) {
    const std::string name = printable(row.name);
    out << "  " << name << std::string(width - name.size(), ' ') << "  " << counted(row.seeds, "seed") << ", "
        << counted(row.hits, "hit") << "\n";
  }
  if (!table.never_hit.empty()) {
    out << "probes never hit (" << table.never_hit.size() << "):\n";
    for (const std::string& name : table.never_hit) out << "  " << printable(name) << "\n";
  }
}

}  // namespace dagsim::cli
