// A job run's records, read and checked key by key (job_records.h).
#include "scenarios/workloads/job/job_records.h"

#include <algorithm>
#include <cmath>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::scenarios::job_records {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw errors::invalid_records(what + ": " + why);
}

const json& at(const json& object, const char* key, const std::string& what) {
  if (!object.is_object()) bad(what, "expected an object, got " + printable(object.dump(), 200));
  if (!object.contains(key)) bad(what + "." + key, "missing");
  return object.at(key);
}

std::string text(const json& object, const char* key, const std::string& what) {
  const json& v = at(object, key, what);
  if (!v.is_string()) bad(what + "." + key, "expected a string, got " + printable(v.dump(), 200));
  return v.get<std::string>();
}

bool boolean(const json& object, const char* key, const std::string& what) {
  const json& v = at(object, key, what);
  if (!v.is_boolean()) bad(what + "." + key, "expected true or false, got " + printable(v.dump(), 200));
  return v.get<bool>();
}

template <typename T>
T integer(const json& v, const std::string& what) {
  return integer_from_record<T>(v, what);
}

template <typename T>
T integer(const json& object, const char* key, const std::string& what) {
  return integer_from_record<T>(at(object, key, what), what + "." + key);
}

double ms(const json& v, const std::string& what) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    bad(what, "expected a time in ms (a number >= 0), got " + printable(v.dump(), 200));
  }
  return v.get<double>();
}

double ms(const json& object, const char* key, const std::string& what) { return ms(at(object, key, what), what + "." + key); }

// A key that may be null (or, with `absent_ok`, missing).
std::optional<double> optional_ms(const json& object, const char* key, const std::string& what, bool absent_ok) {
  if (absent_ok && object.is_object() && !object.contains(key)) return std::nullopt;
  const json& v = at(object, key, what);
  if (v.is_null()) return std::nullopt;
  return ms(v, what + "." + key);
}

const json& array(const json& object, const char* key, const std::string& what) {
  const json& v = at(object, key, what);
  if (!v.is_array()) bad(what + "." + key, "expected an array, got " + printable(v.dump(), 200));
  return v;
}

std::vector<std::string> strings(const json& object, const char* key, const std::string& what) {
  std::vector<std::string> out;
  const json& list = array(object, key, what);
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) bad(what + "." + key + "[" + std::to_string(i) + "]", "expected a string");
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

std::string item(const std::string& what, size_t i) { return what + "[" + std::to_string(i) + "]"; }

Exit exit_of(const json& object, const char* key, const std::string& what) {
  const json& v = at(object, key, what);
  const std::string w = what + "." + key;
  Exit e;
  if (v.is_null()) return e;
  if (!v.is_object() || v.size() != 1) bad(w, "expected {\"code\": C}, {\"signal\": \"NAME\"} or null, got " + printable(v.dump(), 200));
  if (v.contains("code")) {
    e.code = integer<int64_t>(v.at("code"), w + ".code");
  } else if (v.contains("signal")) {
    if (!v.at("signal").is_string() || v.at("signal").get<std::string>().empty()) bad(w + ".signal", "expected a signal's name");
    e.signal = v.at("signal").get<std::string>();
  } else {
    bad(w, "expected {\"code\": C}, {\"signal\": \"NAME\"} or null, got " + printable(v.dump(), 200));
  }
  return e;
}

}  // namespace

std::string Exit::text() const {
  if (code) return "exit " + std::to_string(*code);
  if (!signal.empty()) return signal;
  return "no exit";
}

std::string Incarnation::label() const {
  return incarnation == 0 ? name : name + " (incarnation " + std::to_string(incarnation) + ")";
}

std::string Fault::label() const {
  return kind + " of " + target + (line > 0 ? " (line " + std::to_string(line) + ")" : "");
}

std::optional<uint32_t> target_agent(const std::string& target, const std::vector<std::string>& names) {
  const std::string name = target.substr(0, target.find(':'));
  for (uint32_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return i;
  }
  return std::nullopt;
}

std::vector<std::vector<std::string>> partition_groups(const std::string& target) {
  std::vector<std::vector<std::string>> groups(1);
  std::string name;
  for (char c : target + "|") {
    if (c == ',' || c == '|') {
      if (!name.empty()) groups.back().push_back(name);
      name.clear();
      if (c == '|') groups.emplace_back();
    } else if (c != ' ') {
      name += c;
    }
  }
  groups.pop_back();
  std::erase_if(groups, [](const auto& g) { return g.empty(); });
  return groups;
}

JobRecords read_job_records(const Scenario& scenario, const RunRecords& records) {
  (void)scenario;
  JobRecords out;
  out.end_ms = static_cast<double>(records.end.ns()) / 1e6;
  const json& job = records.job;
  if (!job.is_object()) bad("job", "expected the job run's object (job_spec.h), got " + printable(job.dump(), 200));
  out.dir = text(job, "dir", "job");
  out.launcher = text(job, "launcher", "job");
  out.rdzv_backend = text(job, "rdzv_backend", "job");
  out.seed = integer<uint64_t>(job, "seed", "job");
  const json& rounds = array(job, "rounds", "job");
  for (size_t i = 0; i < rounds.size(); ++i) {
    const std::string w = item("job.rounds", i);
    Round r;
    r.round = integer<uint64_t>(rounds[i], "round", w);
    r.at_ms = ms(rounds[i], "at_ms", w);
    r.participants = strings(rounds[i], "participants", w);
    out.rounds.push_back(std::move(r));
  }
  const json& store = at(job, "store", "job");
  out.store_record = text(store, "record", "job.store");
  out.store_format = text(store, "format", "job.store");
  out.store_report = at(store, "report", "job.store");
  if (!out.store_report.is_object() && !out.store_report.is_null()) bad("job.store.report", "expected an object or null");
  const json& violations = array(store, "violations", "job.store");
  for (size_t i = 0; i < violations.size(); ++i) {
    const std::string w = item("job.store.violations", i);
    Violation v;
    if (violations[i].is_string()) {
      // to_string(Violation): "L6 (where; nodes): text".
      v.text = violations[i].get<std::string>();
      v.invariant = v.text.substr(0, v.text.find_first_of(" :"));
    } else if (violations[i].is_object()) {
      v.invariant = text(violations[i], "invariant", w);
      v.text = v.invariant + ": " + text(violations[i], "text", w);
    } else {
      bad(w, "expected a violation (a string or {\"invariant\", \"text\"})");
    }
    if (v.invariant.empty()) bad(w, "a violation without its invariant");
    out.violations.push_back(std::move(v));
  }
  out.store_error = text(store, "error", "job.store");
  // A round recorded without its participants: the store's report names them ("members", each
  // {"node", "pid", "rank"}), as "NODE_PID" in rank order, the form PyTorch's descriptors take.
  if (out.store_report.is_object() && out.store_report.contains("rounds") && out.store_report["rounds"].is_array()) {
    const json& reported = out.store_report["rounds"];
    for (size_t i = 0; i < out.rounds.size() && i < reported.size(); ++i) {
      Round& r = out.rounds[i];
      const json& from = reported[i];
      if (!r.participants.empty() || !from.is_object() || from.value("round", json()) != json(r.round)) continue;
      const json members = from.value("members", json::array());
      if (!members.is_array()) continue;
      for (const json& m : members) {
        if (!m.is_object() || !m.contains("pid") || !m["pid"].is_number_integer()) continue;
        const std::string node = m.contains("node") && m["node"].is_string() ? m["node"].get<std::string>() : "?";
        r.participants.push_back(node + "_" + std::to_string(m["pid"].get<int64_t>()));
      }
    }
  }
  const json& orphans = array(job, "orphans", "job");
  for (size_t i = 0; i < orphans.size(); ++i) {
    const std::string w = item("job.orphans", i);
    Orphan o{integer<int64_t>(orphans[i], "pid", w), text(orphans[i], "cmdline", w), std::nullopt, std::nullopt};
    if (orphans[i].contains("agent") && !orphans[i]["agent"].is_null()) o.agent = integer<uint32_t>(orphans[i], "agent", w);
    if (orphans[i].contains("incarnation") && !orphans[i]["incarnation"].is_null()) {
      o.incarnation = integer<uint32_t>(orphans[i], "incarnation", w);
    }
    out.orphans.push_back(std::move(o));
  }
  const json& commands = array(job, "commands", "job");
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string w = item("job.commands", i);
    Command c;
    c.check = integer<uint32_t>(commands[i], "check", w);
    c.argv = strings(commands[i], "argv", w);
    const json& e = at(commands[i], "exit", w);
    if (!e.is_null()) c.exit = integer<int64_t>(e, w + ".exit");
    c.output = text(commands[i], "output", w);
    out.commands.push_back(std::move(c));
  }
  out.reference = job.contains("reference") ? job.at("reference") : json(nullptr);
  if (!out.reference.is_null() && !out.reference.is_object()) bad("job.reference", "expected an object or null");

  for (const NodeRecord& r : records.nodes) {
    const std::string name = r.node < records.node_names.size() ? records.node_names[r.node] : "node" + std::to_string(r.node);
    const std::string w = "nodes/" + name + "." + std::to_string(r.incarnation) + ".json: data";
    Incarnation inc;
    inc.node = r.node;
    inc.incarnation = r.incarnation;
    inc.name = name;
    inc.pid = integer<int64_t>(r.data, "pid", w);
    inc.started_ms = ms(r.data, "started_ms", w);
    inc.ended_ms = optional_ms(r.data, "ended_ms", w, false);
    inc.exit = exit_of(r.data, "exit", w);
    inc.stopped_by_run = boolean(r.data, "stopped_by_run", w);
    inc.argv = strings(r.data, "argv", w);
    inc.log = text(r.data, "log", w);
    const json& workers = array(r.data, "workers", w);
    for (size_t i = 0; i < workers.size(); ++i) {
      const std::string ww = item(w + ".workers", i);
      Worker k;
      k.local_rank = integer<uint32_t>(workers[i], "local_rank", ww);
      const json& rank = at(workers[i], "rank", ww);
      if (!rank.is_null()) k.rank = integer<uint32_t>(rank, ww + ".rank");
      k.pid = integer<int64_t>(workers[i], "pid", ww);
      k.started_ms = ms(workers[i], "started_ms", ww);
      k.ended_ms = optional_ms(workers[i], "ended_ms", ww, false);
      k.exit = exit_of(workers[i], "exit", ww);
      inc.workers.push_back(k);
    }
    inc.restarts = integer<uint64_t>(r.data, "restarts", w);
    out.incarnations.push_back(std::move(inc));
  }
  std::sort(out.incarnations.begin(), out.incarnations.end(), [](const Incarnation& a, const Incarnation& b) {
    return std::pair(a.node, a.incarnation) < std::pair(b.node, b.incarnation);
  });

  if (!records.fault_timeline.is_array()) bad("fault_timeline", "expected an array");
  for (size_t i = 0; i < records.fault_timeline.size(); ++i) {
    const json& f = records.fault_timeline[i];
    const std::string w = item("fault_timeline", i);
    Fault fault;
    fault.index = i;
    fault.kind = text(f, "kind", w);
    fault.target = text(f, "target", w);
    fault.line = integer<int>(f, "line", w);
    fault.at_ms = optional_ms(f, "at_ms", w, true);
    fault.until_ms = optional_ms(f, "until_ms", w, true);
    fault.fired = boolean(f, "fired", w);
    if (f.contains("trigger")) fault.trigger = text(f, "trigger", w);
    if (f.contains("detail")) fault.detail = text(f, "detail", w);
    out.faults.push_back(std::move(fault));
  }
  return out;
}

}  // namespace dagsim::scenarios::job_records
