// The sweep summary reader (sweep_summary.h).
#include "scenarios/cli/sweep_summary.h"

#include <nlohmann/json.hpp>

#include "core/base/bounded_file.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/cli/json_fields.h"
#include "scenarios/format/bounded_json.h"

namespace dagsim::cli {

namespace {

using nlohmann::json;
using Fields = JsonFields;

const char* type_of(const json& v) { return json_type_of(v); }

}  // namespace

SweepSummary parse_sweep_summary(std::string_view text, const std::string& name) {
  const json j = scenarios::parse_bounded_json(text, kMaxSweepSummaryDepth, ErrorCode::invalid_argument, name);
  const auto not_summary = [&](const std::string& why) {
    return errors::invalid_argument(printable(name, kPathMax) + ": not a `dagsim check --json` summary (" + why + ")");
  };
  if (!j.is_object()) throw not_summary(std::string("it is ") + type_of(j) + ", not an object");
  auto results = j.find("results");
  if (results == j.end()) throw not_summary("no \"results\" list");
  SweepSummary out;
  const Fields top{j, "", name};
  if (!results->is_array()) top.wrong("results", "an array", *results);
  top.text("file", out.file);
  top.text("seeds", out.seeds);
  top.count("runs", out.runs);
  top.count("passed", out.passed);
  top.text("note", out.note);
  out.results.reserve(results->size());
  for (size_t i = 0; i < results->size(); ++i) {
    const json& s = (*results)[i];
    const std::string path = "results[" + std::to_string(i) + "]";
    if (!s.is_object()) {
      throw errors::invalid_argument(printable(name, kPathMax) + ": " + path + ": expected an object, got " + type_of(s));
    }
    const Fields f{s, path, name};
    SweepSeed seed;
    f.count("seed", seed.seed);
    f.text("verdict", seed.verdict);
    f.number("seconds", seed.seconds);
    f.text("summary", seed.summary);
    f.text("replay", seed.replay);
    if (const json* failed = f.find("failed_checks")) {
      if (!failed->is_array()) f.wrong("failed_checks", "an array", *failed);
      for (size_t k = 0; k < failed->size(); ++k) {
        const json& c = (*failed)[k];
        const std::string at = path + ".failed_checks[" + std::to_string(k) + "]";
        if (!c.is_object()) throw errors::invalid_argument(printable(name, kPathMax) + ": " + at + ": expected an object, got " + type_of(c));
        const Fields cf{c, at, name};
        SweepFailure failure;
        cf.text("check", failure.check);
        cf.text("message", failure.message);
        seed.failed_checks.push_back(std::move(failure));
      }
    }
    out.results.push_back(std::move(seed));
  }
  if (const json* probes = top.find("probes")) {
    if (!probes->is_object()) top.wrong("probes", "an object", *probes);
    out.has_probes = true;
    for (const auto& [probe, counts] : probes->items()) {
      if (!counts.is_object()) {
        throw errors::invalid_argument(printable(name, kPathMax) + ": probes." + key_name(probe) + ": expected an object, got " + type_of(counts));
      }
      const Fields pf{counts, "probes." + key_name(probe), name};
      SweepProbe row{probe, 0, 0};
      pf.count("seeds", row.seeds);
      pf.count("hits", row.hits);
      out.probes.push_back(std::move(row));
    }
  }
  if (const json* never = top.find("probes_never_hit")) {
    if (!never->is_array()) top.wrong("probes_never_hit", "an array", *never);
    out.has_probes = true;
    for (size_t k = 0; k < never->size(); ++k) {
      const json& v = (*never)[k];
      if (!v.is_string()) {
        throw errors::invalid_argument(printable(name, kPathMax) + ": probes_never_hit[" + std::to_string(k) + "]: expected a string, got " + type_of(v));
      }
      out.probes_never_hit.push_back(v.get<std::string>());
    }
  }
  return out;
}

SweepSummary read_sweep_summary(const std::string& path) {
  const std::string text = read_bounded_file(path, kMaxSweepSummaryBytes, ErrorCode::invalid_argument, "a sweep summary");
  return parse_sweep_summary(text, path);
}

}  // namespace dagsim::cli
