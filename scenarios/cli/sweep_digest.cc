// The sweep's digest (sweep_digest.h).
#include "scenarios/cli/sweep_digest.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

namespace dagsim::cli {
namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// A seed's run time as the digest orders and bins it: anyone may have written the summary, so a
// time that is no time (negative, infinite, NaN) counts as 0, never as an index out of range.
double seconds_of(const SweepSeed& s) { return std::isfinite(s.seconds) && s.seconds > 0 ? s.seconds : 0.0; }

// A check's name: what `dagsim check` writes before ": " in a seed's summary.
bool is_check_name(std::string_view text) {
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A failing seed's failures: its failed checks, or what its summary line says.
std::vector<SweepFailure> failures_of(const SweepSeed& s) {
  // A seed stopped by a host limit has no verdict: the checks it had failed when stopped are not
  // findings (check's exit code and its JUnit cases skip them), so it is one group of its own.
  if (s.verdict == "LIMIT") return {{s.verdict, s.summary}};
  if (!s.failed_checks.empty()) return s.failed_checks;
  const size_t colon = s.summary.find(": ");
  if (colon != std::string::npos && is_check_name(std::string_view(s.summary).substr(0, colon))) {
    return {{s.summary.substr(0, colon), s.summary.substr(colon + 2)}};
  }
  return {{s.verdict, s.summary}};
}

}  // namespace

std::string message_pattern(std::string_view message) {
  std::string out;
  for (size_t i = 0; i < message.size();) {
    if (!is_digit(message[i])) {
      out += message[i++];
      continue;
    }
    while (i < message.size() && (is_digit(message[i]) || (message[i] == '.' && i + 1 < message.size() && is_digit(message[i + 1])))) {
      ++i;
    }
    out += '#';
  }
  return out;
}

SweepDigest digest_sweep(const SweepSummary& summary, size_t slowest, size_t bins) {
  SweepDigest d;
  std::vector<const SweepSeed*> judged;
  for (const SweepSeed& s : summary.results) {
    if (s.verdict != "INTERRUPTED") judged.push_back(&s);
  }
  d.judged = judged.size();
  // Groups by (check, pattern), in the order first met, then sorted below.
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const SweepSeed* s : judged) {
    if (s->verdict == "PASSED") {
      ++d.passed;
      continue;
    }
    for (const SweepFailure& f : failures_of(*s)) {
      const auto key = std::make_pair(f.check, message_pattern(f.message));
      auto [it, added] = index.try_emplace(key, d.failures.size());
      if (added) d.failures.push_back({f.check, key.second, f.message, {}});
      std::vector<uint64_t>& seeds = d.failures[it->second].seeds;
      if (seeds.empty() || seeds.back() != s->seed) seeds.push_back(s->seed);
    }
  }
  d.pass_rate = d.judged == 0 ? 0 : static_cast<double>(d.passed) / static_cast<double>(d.judged);
  std::stable_sort(d.failures.begin(), d.failures.end(), [](const SweepFailureGroup& a, const SweepFailureGroup& b) {
    if (a.seeds.size() != b.seeds.size()) return a.seeds.size() > b.seeds.size();
    return std::tie(a.check, a.pattern) < std::tie(b.check, b.pattern);
  });

  std::vector<const SweepSeed*> by_time = judged;
  std::stable_sort(by_time.begin(), by_time.end(), [](const SweepSeed* a, const SweepSeed* b) {
    if (seconds_of(*a) != seconds_of(*b)) return seconds_of(*a) > seconds_of(*b);
    return a->seed < b->seed;
  });
  for (size_t i = 0; i < by_time.size() && i < slowest; ++i) d.slowest.push_back(*by_time[i]);
  if (by_time.empty() || bins == 0) return d;
  d.median_seconds = seconds_of(*by_time[by_time.size() / 2]);

  const double lo = seconds_of(*by_time.back()), hi = seconds_of(*by_time.front());
  // Equal seconds everywhere make one bin; otherwise `bins` of equal width from the fastest to the slowest.
  const size_t n = hi > lo ? bins : 1;
  const double width = hi > lo ? (hi - lo) / static_cast<double>(n) : 0;
  for (size_t i = 0; i < n; ++i) {
    d.histogram.push_back({lo + width * static_cast<double>(i), i + 1 == n ? hi : lo + width * static_cast<double>(i + 1), 0, 0});
  }
  for (const SweepSeed* s : judged) {
    // In [0, n]: seconds_of is in [lo, hi] and the width a finite positive number (or 0).
    const double at = width > 0 ? std::floor((seconds_of(*s) - lo) / width) : 0;
    const size_t bin = std::min(static_cast<size_t>(std::clamp(at, 0.0, static_cast<double>(n - 1))), n - 1);
    (s->verdict == "PASSED" ? d.histogram[bin].passed : d.histogram[bin].failed) += 1;
  }
  return d;
}

}  // namespace dagsim::cli
