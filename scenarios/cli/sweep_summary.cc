// The sweep summary reader (sweep_summary.h).
#include "scenarios/cli/sweep_summary.h"

#include <nlohmann/json.hpp>

#include "core/base/bounded_file.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/format/bounded_json.h"

namespace dagsim::cli {

namespace {

using nlohmann::json;

const char* type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
      return v.get<int64_t>() < 0 ? "a negative integer" : "an integer";
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction";
    default: return "something else";
  }
}

// Reads one object's typed fields, naming each by its path on a wrong type.
struct Fields {
  const json& object;
  std::string path;  // "" for the top, "results[3]" for a seed
  const std::string& name;

  [[noreturn]] void wrong(const std::string& key, const char* expected, const json& v) const {
    throw errors::invalid_argument(printable(name, kPathMax) + ": " + (path.empty() ? "" : path + ".") + key_name(key) +
                                   ": expected " + expected + ", got " + type_of(v));
  }
  const json* find(const std::string& key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }
  void text(const std::string& key, std::string& out) const {
    if (const json* v = find(key)) {
      if (!v->is_string()) wrong(key, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void count(const std::string& key, uint64_t& out) const {
    if (const json* v = find(key)) {
      if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0)) {
        wrong(key, "an unsigned integer", *v);
      }
      out = v->get<uint64_t>();
    }
  }
  void number(const std::string& key, double& out) const {
    if (const json* v = find(key)) {
      if (!v->is_number()) wrong(key, "a number", *v);
      out = v->get<double>();
    }
  }
};

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
  return out;
}

SweepSummary read_sweep_summary(const std::string& path) {
  const std::string text = read_bounded_file(path, kMaxSweepSummaryBytes, ErrorCode::invalid_argument, "a sweep summary");
  return parse_sweep_summary(text, path);
}

}  // namespace dagsim::cli
