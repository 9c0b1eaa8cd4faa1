// The search of `dagsim shrink` (shrink_search.h).
#include "scenarios/shrink/shrink_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/base/assert.h"
#include "scenarios/shrink/ddmin.h"
#include "scenarios/shrink/fault_materialise.h"
#include "scenarios/shrink/toml_edits.h"

namespace dagsim::shrink {
namespace {

size_t count_statements(const toml::node& node) {
  size_t n = 0;
  if (const toml::table* t = node.as_table()) {
    for (const auto& [key, value] : *t) n += count_statements(value);
  } else if (const toml::array* a = node.as_array()) {
    for (const toml::node& e : *a) n += (e.is_table() ? 1 : 0) + count_statements(e);
  }
  return n;
}

// Faults that strike before the scenario's end (the least of max_virtual_time_ms and every
// duration_ms) and end at or after it: the loader warns of each.
bool bound_key(const TomlPath& path) {
  if (path.empty() || path.back().is_index || path[0].key == "faults") return false;
  return (path.size() == 1 && path[0].key == "max_virtual_time_ms") || path.back().key == "duration_ms";
}

// The scenario's end as written: the least of max_virtual_time_ms and every duration_ms.
std::optional<double> scenario_bound(const toml::table& root) {
  std::optional<double> bound;
  for (const TomlPath& path : numbers_in(root)) {
    if (!bound_key(path)) continue;
    const double v = number_at(root, path);
    bound = std::min(bound.value_or(v), v);
  }
  return bound;
}

// `root` with every fault that strikes before its end and ends at or after it ending 1 ms before
// (where that is after its start): a shorter bound takes the faults' ends with it.
toml::table clip_late_ends(toml::table root) {
  const std::optional<double> bound = scenario_bound(root);
  toml::array* faults = root["faults"].as_array();
  if (!bound || faults == nullptr) return root;
  for (size_t i = 0; i < faults->size(); ++i) {
    const toml::table* fault = faults->get(i)->as_table();
    if (fault == nullptr) continue;
    const std::vector<toml::table> ends = clipped_ends(*fault, *bound);
    if (ends.size() == 2) faults->replace(faults->cbegin() + static_cast<std::ptrdiff_t>(i), ends[1]);
  }
  return root;
}

size_t late_ends(const toml::table& root) {
  const std::optional<double> bound = scenario_bound(root);
  const toml::array* faults = root["faults"].as_array();
  if (!bound || faults == nullptr) return 0;
  size_t n = 0;
  for (const toml::node& node : *faults) {
    const toml::table* fault = node.as_table();
    if (fault == nullptr) continue;
    const std::optional<double> at = (*fault)["at_ms"].value<double>();
    const std::optional<double> end = fault_end(*fault);
    if (at && end && *at < *bound && *end >= *bound) ++n;
  }
  return n;
}

size_t count_faults(const toml::table& root, const RunOutcome& run) {
  if (run.faults.is_array()) return run.faults.size();
  const toml::array* faults = root["faults"].as_array();
  return faults == nullptr ? 0 : faults->size();
}

std::string ms_text(const std::optional<double>& ms) {
  if (!ms) return "?";
  std::ostringstream out;
  out << std::round(*ms * 1000) / 1000;
  return out.str();
}

class Search {
 public:
  Search(const std::string& text, const RunOutcome& run, const FailureSignature& signature, const SearchEnv& env,
         const SearchOptions& options)
      : signature_(signature), env_(env), options_(options), text_(text), run_(run) {
    tree_ = parse_toml(text_, "scenario");
    const std::optional<uint32_t> nodes = env_.validate(text_);
    DAGSIM_ASSERT(nodes.has_value());
    nodes_ = *nodes;
    DAGSIM_ASSERT(signature_.matches(run_));
  }

  SearchResult run() {
    SearchResult result;
    result.before = sizes_of(text_, nodes_, run_);
    bool progress = true;
    while (progress && stopped_by_.empty()) {
      const uint64_t accepted = accepted_;
      pass_checks();
      pass_materialise();
      pass_faults();
      pass_arrays();
      pass_numbers();
      pass_keys();
      pass_fault_ends();
      progress = accepted_ != accepted;
    }
    result.text = text_;
    result.run = run_;
    result.runs = runs_;
    result.stopped_by = stopped_by_.empty() ? "fixpoint" : stopped_by_;
    result.after = sizes_of(text_, nodes_, run_);
    return result;
  }

 private:
  struct Verdict {
    bool valid = false;
    bool same = false;
    RunOutcome run;
    uint32_t nodes = 0;
  };

  bool stopped() const { return !stopped_by_.empty(); }

  // Runs `candidate` unless known; takes it as the current scenario when it fails the same way and
  // is no larger. True when taken.
  bool attempt(const toml::table& candidate, const std::string& pass) {
    if (stopped()) return false;
    const std::string text = to_text(candidate);
    if (text == text_) return false;
    auto it = cache_.find(text);
    if (it == cache_.end()) {
      Verdict v;
      const std::optional<uint32_t> nodes = env_.validate(text);
      if (nodes) {
        if (runs_ >= options_.max_runs) {
          stopped_by_ = "max_runs";
          return false;
        }
        if (options_.out_of_time && options_.out_of_time()) {
          stopped_by_ = "max_wall_time";
          return false;
        }
        ++runs_;
        v.valid = true;
        v.nodes = *nodes;
        v.run = env_.run(text);
        v.same = signature_.matches(v.run);
      }
      it = cache_.emplace(text, std::move(v)).first;
    }
    const Verdict& v = it->second;
    if (!v.valid || !v.same) return false;
    const toml::table parsed = parse_toml(text, "candidate");
    if (count_faults(parsed, v.run) > count_faults(tree_, run_)) return false;
    // A shorter bound must not leave a fault's end at or past it (the loader would warn that it
    // can never happen); the drawn faults, as materialised, may.
    if (!materialising_ && late_ends(parsed) > late_ends(tree_)) return false;
    // A [job]'s time is the wall time of real processes, which varies run to run: not a size.
    const bool timed = v.run.transport != "job" && v.run.transport != "tcp";
    if (timed && v.run.virtual_time_ms && run_.virtual_time_ms && *v.run.virtual_time_ms > *run_.virtual_time_ms) return false;
    take(text, parsed, v, pass);
    return true;
  }

  void take(const std::string& text, const toml::table& parsed, const Verdict& v, const std::string& pass) {
    const Sizes before = sizes_of(text_, nodes_, run_);
    text_ = text;
    tree_ = parsed;
    run_ = v.run;
    nodes_ = v.nodes;
    ++accepted_;
    if (!options_.progress) return;
    const Sizes after = sizes_of(text_, nodes_, run_);
    std::ostringstream line;
    line << "run " << runs_ << " (" << pass << "): faults " << before.faults << " -> " << after.faults
         << ", virtual time " << ms_text(before.virtual_time_ms) << " -> " << ms_text(after.virtual_time_ms) << " ms";
    if (before.nodes != after.nodes) line << ", nodes " << before.nodes << " -> " << after.nodes;
    line << ", lines " << before.lines << " -> " << after.lines;
    options_.progress(line.str());
  }

  // ddmin over the array at `path` of the current tree. True when it removed any.
  bool shrink_array(const TomlPath& path, const std::string& pass) {
    const toml::node* node = node_at(tree_, path);
    if (node == nullptr || !node->is_array() || node->as_array()->empty()) return false;
    const toml::table base = tree_;
    const size_t n = node->as_array()->size();
    const std::vector<size_t> kept = ddmin(
        n, [&](const std::vector<size_t>& subset) { return attempt(keep_elements(base, path, subset), pass); },
        [&] { return stopped(); });
    return kept.size() < n;
  }

  void pass_checks() {
    if (signature_.kind != FailureSignature::Kind::check || signature_.check.empty()) return;
    const toml::array* checks = tree_["checks"].as_array();
    if (checks == nullptr) return;
    std::vector<size_t> keep;
    for (size_t i = 0; i < checks->size(); ++i) {
      const toml::table* t = checks->get(i)->as_table();
      if (t != nullptr && t->get("kind") != nullptr && t->get("kind")->value<std::string>() == signature_.check) {
        keep.push_back(i);
      }
    }
    if (keep.size() == checks->size()) return;
    attempt(keep_elements(tree_, {{"checks", 0, false}}, keep), "keep the failing check");
  }

  void pass_materialise() {
    if (tree_.get("random_faults") == nullptr || stopped()) return;
    std::string why;
    // The timeline's lines are those of the current text.
    const toml::table source = parse_toml(text_, "scenario");
    if (std::optional<toml::table> explicit_faults = materialise_random_faults(source, run_.faults, &why)) {
      materialising_ = true;
      const bool taken = attempt(*explicit_faults, "random faults materialised");
      materialising_ = false;
      if (taken) return;
    }
    // Not written out (or it failed otherwise): smaller rates, windows and concurrency instead.
    shrink_numbers_under({{"random_faults", 0, false}}, "random faults");
  }

  void pass_faults() {
    if (tree_["faults"].as_array() == nullptr) return;
    shrink_array({{"faults", 0, false}}, "remove faults");
  }

  void pass_arrays() {
    std::vector<TomlPath> arrays = arrays_in(tree_);
    for (size_t i = 0; i < arrays.size() && !stopped(); ++i) {
      const TomlPath& path = arrays[i];
      if (path.size() == 1 && path[0].key == "faults") continue;  // pass 3's
      if (shrink_array(path, "remove " + path_text(path) + " elements")) arrays = arrays_in(tree_);
    }
  }

  // Each fault earlier, then shorter, then milder, as long as one of them is taken.
  void shrink_faults() {
    const toml::array* faults = tree_["faults"].as_array();
    for (size_t i = 0; faults != nullptr && i < faults->size() && !stopped(); ++i) {
      using Generator = std::vector<toml::table> (*)(const toml::table&);
      const std::pair<Generator, std::string> generators[] = {
          {earlier_faults, "fault earlier"}, {shorter_faults, "fault shorter"}, {milder_faults, "milder fault"}};
      for (const auto& [generate, pass] : generators) {
        bool taken = true;
        while (taken && !stopped()) {
          taken = false;
          const toml::table* fault = tree_["faults"].as_array()->get(i)->as_table();
          if (fault == nullptr) break;
          for (const toml::table& edited : generate(*fault)) {
            toml::table candidate = tree_;
            candidate["faults"].as_array()->replace(candidate["faults"].as_array()->cbegin() + static_cast<std::ptrdiff_t>(i), edited);
            if (attempt(candidate, pass)) {
              taken = true;
              break;
            }
          }
        }
      }
      faults = tree_["faults"].as_array();
    }
  }

  // One number made as small as it goes: the first smaller value taken, again from there.
  void shrink_number(const TomlPath& path, const std::string& pass) {
    bool taken = true;
    while (taken && !stopped()) {
      taken = false;
      const toml::node* node = node_at(tree_, path);
      if (node == nullptr || !node->is_number()) return;
      std::vector<double> values = smaller_numbers(number_at(tree_, path), integer_at(tree_, path));
      // The run's own end: max_virtual_time_ms a bit past it first.
      if (path.size() == 1 && path[0].key == "max_virtual_time_ms" && run_.virtual_time_ms) {
        const double bound = std::ceil(*run_.virtual_time_ms * 1.1) + 1;
        if (bound < number_at(tree_, path)) values.insert(values.begin(), bound);
      }
      for (double value : values) {
        toml::table candidate = with_number(tree_, path, value);
        if (bound_key(path)) candidate = clip_late_ends(std::move(candidate));
        if (attempt(candidate, pass)) {
          taken = true;
          break;
        }
      }
    }
  }

  void shrink_numbers_under(const TomlPath& prefix, const std::string& pass) {
    for (const TomlPath& path : numbers_in(tree_)) {
      if (stopped()) return;
      if (path.size() < prefix.size()) continue;
      bool under = true;
      for (size_t i = 0; i < prefix.size(); ++i) under = under && path[i].key == prefix[i].key && path[i].is_index == prefix[i].is_index;
      if (!under) continue;
      shrink_number(path, pass + ": " + path_text(path));
    }
  }

  // The distinct start times of [[faults]], ascending.
  std::vector<double> fault_starts() const {
    std::vector<double> starts;
    if (const toml::array* faults = tree_["faults"].as_array()) {
      for (const toml::node& node : *faults) {
        const toml::table* fault = node.as_table();
        const toml::node* at = fault == nullptr ? nullptr : fault->get("at_ms");
        if (at == nullptr || !at->is_number()) continue;
        const double v = at->is_integer() ? static_cast<double>(at->as_integer()->get()) : at->as_floating_point()->get();
        if (std::find(starts.begin(), starts.end(), v) == starts.end()) starts.push_back(v);
      }
    }
    std::sort(starts.begin(), starts.end());
    return starts;
  }

  // The faults from the k-th start on (and the run's end) moved earlier together, their spacing
  // kept, for each k in time order, as long as one shift is taken.
  void shift_groups() {
    for (size_t k = 0; !stopped(); ++k) {
      bool taken = true;
      while (taken && !stopped()) {
        taken = false;
        const std::vector<double> starts = fault_starts();
        if (k >= starts.size()) return;
        for (double delta : group_shifts(tree_, starts[k])) {
          if (attempt(clip_late_ends(shifted_from(tree_, starts[k], delta)), "faults from " + ms_text(starts[k]) + " ms on earlier together")) {
            taken = true;
            break;
          }
        }
      }
    }
  }

  // A fault whose end falls at or after the run's end (replay would warn that it never comes):
  // without its end, or with its end just before the run's end.
  void pass_fault_ends() {
    if (!run_.virtual_time_ms || run_.transport == "job" || run_.transport == "tcp") return;
    // The run's end: where it ended, and where the loader says it ends (the time bound, a
    // workload's duration), whichever comes first.
    const double end = std::min(*run_.virtual_time_ms, scenario_bound(tree_).value_or(*run_.virtual_time_ms));
    const toml::array* faults = tree_["faults"].as_array();
    for (size_t i = 0; faults != nullptr && i < faults->size() && !stopped(); ++i) {
      const toml::table* fault = faults->get(i)->as_table();
      if (fault == nullptr) continue;
      for (const toml::table& edited : clipped_ends(*fault, end)) {
        toml::table candidate = tree_;
        candidate["faults"].as_array()->replace(candidate["faults"].as_array()->cbegin() + static_cast<std::ptrdiff_t>(i), edited);
        if (attempt(candidate, "fault's end within the run")) break;
      }
      faults = tree_["faults"].as_array();
    }
  }

  void pass_numbers() {
    shrink_faults();
    if (stopped()) return;
    shift_groups();
    if (stopped()) return;
    // The time bound first: a shorter run makes every later candidate cheaper.
    if (tree_.get("max_virtual_time_ms") != nullptr) shrink_number({{"max_virtual_time_ms", 0, false}}, "shorter run");
    for (const TomlPath& path : numbers_in(tree_)) {
      if (stopped()) return;
      if (!path.empty() && path[0].key == "faults") continue;  // shrink_faults'
      shrink_number(path, "smaller " + path_text(path));
    }
  }

  void pass_keys() {
    std::vector<TomlPath> tables = tables_in(tree_);
    for (size_t i = 0; i < tables.size() && !stopped(); ++i) {
      const TomlPath path = tables[i];
      // A fault without its end lasts for ever: harsher, not simpler.
      if (!path.empty() && path[0].key == "faults") continue;
      const toml::node* node = node_at(tree_, path);
      if (node == nullptr || !node->is_table()) continue;
      std::vector<std::string> keys = keys_of(tree_, path);
      // The run's bound stays written: without it a shrunk file could run for the default's length.
      if (path.empty()) std::erase(keys, "max_virtual_time_ms");
      const toml::table base = tree_;
      const std::vector<size_t> kept = ddmin(
          keys.size(),
          [&](const std::vector<size_t>& subset) {
            return attempt(keep_keys(base, path, keys, subset), "remove keys of " + (path.empty() ? std::string("the top level") : path_text(path)));
          },
          [&] { return stopped(); });
      if (kept.size() < keys.size()) tables = tables_in(tree_);
    }
  }

  const FailureSignature signature_;
  const SearchEnv& env_;
  const SearchOptions& options_;
  std::string text_;
  toml::table tree_;
  RunOutcome run_;
  uint32_t nodes_ = 0;
  uint64_t runs_ = 0;
  uint64_t accepted_ = 0;
  std::string stopped_by_;
  bool materialising_ = false;  // attempt() lets the drawn faults' late ends in
  std::map<std::string, Verdict> cache_;
};

}  // namespace

Sizes sizes_of(const std::string& text, uint32_t nodes, const RunOutcome& run) {
  Sizes s;
  const toml::table root = parse_toml(text, "scenario");
  s.faults = count_faults(root, run);
  s.virtual_time_ms = run.virtual_time_ms;
  s.nodes = nodes;
  s.statements = count_statements(root);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start != std::string::npos && line[start] != '#') ++s.lines;
  }
  return s;
}

SearchResult shrink_search(const std::string& original_text, const RunOutcome& original_run,
                           const FailureSignature& signature, const SearchEnv& env, const SearchOptions& options) {
  Search search(original_text, original_run, signature, env, options);
  return search.run();
}

}  // namespace dagsim::shrink
