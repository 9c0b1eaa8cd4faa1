// A shard's results as data, written and read back (shard_results.h).
#include "scenarios/cli/shard_results.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "core/base/bounded_file.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/cli/json_fields.h"
#include "scenarios/format/bounded_json.h"

namespace dagsim::cli {
namespace {

using nlohmann::json;

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

SeedOutcome parse_outcome(const json& s, const std::string& path, const std::string& name) {
  const JsonFields f{s, path, name};
  SeedOutcome o{0, 0, "", 0, {}, false, {}};
  const json& seed = f.need("seed", json::value_t::number_unsigned, "an unsigned integer");
  o.seed = seed.get<uint64_t>();
  uint64_t exit_code = 0;
  if (f.find("exit_code") == nullptr) throw errors::invalid_argument(f.where("exit_code") + ": missing (expected an exit code)");
  f.count("exit_code", exit_code);
  if (exit_code > 255) throw errors::invalid_argument(f.where("exit_code") + ": expected an exit code from 0 to 255");
  o.exit_code = static_cast<int>(exit_code);
  f.text("summary", o.summary);
  f.number("seconds", o.seconds);
  f.flag("interrupted", o.interrupted);
  if (const json* checks = f.find("checks")) {
    if (!checks->is_array()) f.wrong("checks", "an array", *checks);
    for (size_t k = 0; k < checks->size(); ++k) {
      const json& c = (*checks)[k];
      const std::string at = path + ".checks[" + std::to_string(k) + "]";
      if (!c.is_object()) throw errors::invalid_argument(printable(name, kPathMax) + ": " + at + ": expected an object, got " + json_type_of(c));
      const JsonFields cf{c, at, name};
      CheckVerdict verdict;
      cf.text("name", verdict.name);
      cf.flag("passed", verdict.passed);
      cf.text("detail", verdict.detail);
      o.checks.push_back(std::move(verdict));
    }
  }
  if (const json* probes = f.find("probes")) {
    if (!probes->is_object()) f.wrong("probes", "an object", *probes);
    const JsonFields pf{*probes, path + ".probes", name};
    for (const auto& [probe, hits] : probes->items()) {
      uint64_t n = 0;
      pf.count(probe, n);
      o.probes[probe] = n;
    }
  }
  return o;
}

}  // namespace

json shard_results_json(const ShardResults& r) {
  json results = json::array();
  for (const SeedOutcome& o : r.outcomes) {
    json checks = json::array();
    for (const CheckVerdict& c : o.checks) checks.push_back({{"name", c.name}, {"passed", c.passed}, {"detail", c.detail}});
    json seed = {{"seed", o.seed},       {"exit_code", o.exit_code}, {"verdict", verdict_of(o)}, {"seconds", o.seconds},
                 {"summary", o.summary}, {"checks", std::move(checks)}, {"probes", o.probes}};
    if (o.interrupted) seed["interrupted"] = true;
    results.push_back(std::move(seed));
  }
  json j = {{"format", kShardResultsFormat},
            {"version", kShardResultsVersion},
            {"scenario", {{"file", r.file}, {"sha256", r.scenario_sha256}}},
            {"seeds", {{"text", r.seeds}, {"first", r.first}, {"last", r.last}}},
            {"shard", {{"index", r.shard.index}, {"count", r.shard.count}, {"source", r.shard.source}}},
            {"started", r.started},
            {"provenance", r.provenance},
            {"probe_names", r.probe_names},
            {"results", std::move(results)}};
  if (!r.note.empty()) j["note"] = r.note;
  if (!r.interrupted.empty()) j["interrupted"] = r.interrupted;
  return j;
}

void write_shard_results(const std::string& path, const ShardResults& results) {
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    // Bytes that are not UTF-8 (a detail quoting a peer's bytes) are kept as they are.
    out << shard_results_json(results).dump(1, ' ', false, json::error_handler_t::ignore) << "\n";
    out.close();
    if (!out) {
      const int error = errno;
      std::remove(temporary.c_str());
      throw errors::invalid_argument("--results " + printable(path, kPathMax) + ": cannot write: " + std::strerror(error));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw errors::invalid_argument("--results " + printable(path, kPathMax) + ": cannot write: " + std::strerror(error));
  }
}

ShardResults parse_shard_results(std::string_view text, const std::string& name) {
  const json j = scenarios::parse_bounded_json(text, kMaxShardResultsDepth, ErrorCode::invalid_argument, name);
  const std::string who = printable(name, kPathMax);
  if (!j.is_object() || j.value("format", json()) != kShardResultsFormat) {
    throw errors::invalid_argument(who + ": not the results of a shard (dagsim check --shard I/N --results FILE)");
  }
  const JsonFields top{j, "", name};
  uint64_t version = 0;
  top.count("version", version);
  if (version != kShardResultsVersion) {
    throw errors::invalid_argument(who + ": format version " + std::to_string(version) + ", but this dagsim reads version " +
                                   std::to_string(kShardResultsVersion));
  }
  ShardResults r;
  const JsonFields scenario{top.need("scenario", json::value_t::object, "an object"), "scenario", name};
  scenario.text("file", r.file);
  scenario.text("sha256", r.scenario_sha256);
  if (!is_sha256_hex(r.scenario_sha256)) throw errors::invalid_argument(who + ": scenario.sha256: expected 64 lowercase hex digits");
  const JsonFields seeds{top.need("seeds", json::value_t::object, "an object"), "seeds", name};
  seeds.text("text", r.seeds);
  seeds.count("first", r.first);
  seeds.count("last", r.last);
  if (r.first > r.last) throw errors::invalid_argument(who + ": seeds: first " + std::to_string(r.first) + " is past last " + std::to_string(r.last));
  const JsonFields shard{top.need("shard", json::value_t::object, "an object"), "shard", name};
  shard.count("index", r.shard.index);
  shard.count("count", r.shard.count);
  shard.text("source", r.shard.source);
  if (r.shard.count == 0 || r.shard.count > kMaxShards || r.shard.index >= r.shard.count) {
    throw errors::invalid_argument(who + ": shard: " + std::to_string(r.shard.index) + "/" + std::to_string(r.shard.count) +
                                   " is not a shard (0 <= index < count <= " + std::to_string(kMaxShards) + ")");
  }
  top.text("note", r.note);
  top.text("started", r.started);
  top.text("interrupted", r.interrupted);
  r.provenance = top.need("provenance", json::value_t::object, "an object");
  const json& names = top.need("probe_names", json::value_t::array, "an array");
  for (size_t k = 0; k < names.size(); ++k) {
    if (!names[k].is_string()) {
      throw errors::invalid_argument(who + ": probe_names[" + std::to_string(k) + "]: expected a string, got " + json_type_of(names[k]));
    }
    r.probe_names.push_back(names[k].get<std::string>());
  }
  const json& results = top.need("results", json::value_t::array, "an array");
  std::set<uint64_t> seen;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string path = "results[" + std::to_string(i) + "]";
    if (!results[i].is_object()) {
      throw errors::invalid_argument(who + ": " + path + ": expected an object, got " + json_type_of(results[i]));
    }
    SeedOutcome o = parse_outcome(results[i], path, name);
    if (!in_shard(r.first, r.last, r.shard, o.seed)) {
      throw errors::invalid_argument(who + ": " + path + ": seed " + std::to_string(o.seed) + " is not one of shard " + r.shard.text() +
                                     " of seeds " + std::to_string(r.first) + ".." + std::to_string(r.last));
    }
    if (!seen.insert(o.seed).second) throw errors::invalid_argument(who + ": " + path + ": seed " + std::to_string(o.seed) + " again");
    r.outcomes.push_back(std::move(o));
  }
  std::sort(r.outcomes.begin(), r.outcomes.end(), [](const SeedOutcome& a, const SeedOutcome& b) { return a.seed < b.seed; });
  return r;
}

ShardResults read_shard_results(const std::string& path) {
  const std::string text = read_bounded_file(path, kMaxShardResultsBytes, ErrorCode::invalid_argument, "a shard's results");
  return parse_shard_results(text, path);
}

}  // namespace dagsim::cli
