// A rendezvous judged from its store's records (store_records.h).
#include "scenarios/workloads/rendezvous/store_records.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "core/base/bounded_file.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/rendezvous/rendezvous_backend.h"
#include "core/rendezvous/rendezvous_state_holder.h"
#include "scenarios/workloads/rendezvous/pytorch_state.h"
#include "scenarios/workloads/rendezvous/rendezvous_judge.h"
#include "net/tcpstore/store_recorder.h"
#include "scenarios/format/bounded_json.h"
#include "scenarios/workloads/rendezvous/store_record_reader.h"

namespace dagsim::scenarios {

namespace {

using rendezvous::NodeDesc;
using rendezvous::RendezvousState;
using runtime::Duration;
using FaultKind = runtime::FaultEvent::Kind;

// The reader takes every line the store writes, and every state it keeps whole decodes.
static_assert(net::tcpstore::kRecordMaxLineBytes <= kMaxStoreRecordLineBytes);
static_assert(net::tcpstore::kRecordStateMax <= kMaxStateBytes);

double ms(TimePoint t) { return static_cast<double>(t.ns()) / 1e6; }

Duration seconds(const nlohmann::json& job, const char* key, Duration fallback) {
  if (!job.contains(key)) return fallback;
  const nlohmann::json& v = job.at(key);
  if (!v.is_number() || v.get<double>() <= 0 || v.get<double>() > 1e9) {
    throw errors::invalid_records(std::string("job.json: ") + key + " must be a positive number of seconds");
  }
  return Duration{static_cast<int64_t>(v.get<double>() * 1e9)};
}

struct JobFault {
  int64_t t = 0;
  std::string kind;
  std::optional<int64_t> pid;
};

struct Job {
  RendezvousSpec spec;
  std::vector<JobFault> faults;
  Duration slack{std::chrono::milliseconds(500)};
  bool writers_known = true;
};

Job read_job(const std::string& path) {
  const std::string name = printable(path, kPathMax);
  const nlohmann::json j = parse_bounded_json(
      read_bounded_file(path, kMaxStoreJobBytes, ErrorCode::invalid_records, "a job.json (the job's settings and faults; docs/cli.md)"),
      kMaxStoreJobDepth, ErrorCode::invalid_records, path);
  try {
    Job job;
    rendezvous::RendezvousSettings& s = job.spec.settings;
    s.run_id = j.at("run_id").get<std::string>();
    s.min_nodes = j.at("min_nodes").get<uint32_t>();
    s.max_nodes = j.at("max_nodes").get<uint32_t>();
    s.timeout.join = seconds(j, "join_timeout_s", s.timeout.join);
    s.timeout.last_call = seconds(j, "last_call_timeout_s", s.timeout.last_call);
    s.timeout.close = seconds(j, "close_timeout_s", s.timeout.close);
    s.keep_alive_interval = seconds(j, "keep_alive_interval_s", s.keep_alive_interval);
    s.keep_alive_max_attempt = j.value("keep_alive_max_attempt", s.keep_alive_max_attempt);
    s.rerendezvous_on_expiry = j.value("rerendezvous_on_expiry", true);
    try {
      rendezvous::validate(s);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) throw;
      throw errors::invalid_records(name + ": " + e.detail());
    }
    job.spec.monitor_interval = seconds(j, "monitor_interval_s", std::chrono::seconds(5));
    job.spec.poll_interval = seconds(j, "poll_interval_s", std::chrono::seconds(1));
    if (j.contains("slack_ms")) {
      const double slack_ms = j.at("slack_ms").get<double>();
      if (!(slack_ms >= 0 && slack_ms <= 1e9)) throw errors::invalid_records(name + ": slack_ms must be 0 to 1e9 milliseconds");
      job.slack = Duration{static_cast<int64_t>(slack_ms * 1e6)};
    }
    job.writers_known = j.value("writers_known", true);
    for (const nlohmann::json& f : j.value("faults", nlohmann::json::array())) {
      JobFault fault{f.at("t").get<int64_t>(), f.at("kind").get<std::string>(), std::nullopt};
      static const std::set<std::string> kKinds = {"kill", "pause", "resume", "store_pause", "store_resume"};
      if (!kKinds.contains(fault.kind)) {
        throw errors::invalid_records(name + ": a fault of kind " + quote(fault.kind) +
                                      " (kinds: kill, pause, resume, store_pause, store_resume)");
      }
      if (fault.t < 0) throw errors::invalid_records(name + ": a fault's time before the Unix epoch");
      if (!fault.kind.starts_with("store_")) fault.pid = f.at("pid").get<int64_t>();
      job.faults.push_back(fault);
    }
    return job;
  } catch (const nlohmann::json::exception& e) {
    throw errors::invalid_records(name + ": " + printable(e.what(), 400));
  }
}

// One client of the store, as the record knows it: by its process when it ran on the store's
// host, else by its connection.
struct Writer {
  std::optional<int64_t> pid;
  uint64_t conn = 0;
  std::vector<CasWrite> writes;
  std::optional<TimePoint> last_read;
  bool touched = false;  // read or wrote the state key
};

}  // namespace

bool is_store_records_dir(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir) / "store.jsonl", ec);
}

StoreRecordsJudgement judge_store_records(const std::string& dir) {
  StoreRecordsJudgement out;
  Job job = read_job(dir + "/job.json");
  out.spec = job.spec;
  const std::string key = rendezvous::state_key(job.spec.settings.run_id);
  const std::string path = dir + "/store.jsonl";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw errors::invalid_records(printable(path, kPathMax) + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw errors::invalid_records(printable(path, kPathMax) + ": cannot be read");
  StoreRecordReader reader(in, path);

  std::optional<int64_t> origin;
  int64_t last_t = 0;
  std::map<uint64_t, std::optional<int64_t>> conn_pid;
  std::map<std::string, Writer> writers;  // "pid N" or "conn N"
  StoreLife life;
  uint64_t version = 0;
  std::map<runtime::Bytes, uint64_t> version_of;  // each value's newest version
  std::optional<runtime::Bytes> current;
  std::set<std::string> formats;
  std::optional<nlohmann::json> cut;
  const auto at = [&](const std::string& what) { return reader.at(what); };
  const std::string key_name = printable(key);
  const auto decode = [&](const runtime::Bytes& value) {
    std::string format;
    try {
      std::optional<RendezvousState> s = decode_stored_state(value, *origin, &format);
      formats.insert(format);
      return s;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::protocol_error) throw;
      throw errors::invalid_records(at("the state of " + key_name + " does not decode: " + e.detail()));
    }
  };
  // A value of the state key as the judge needs it: whole. The store keeps the states clients
  // write whole up to 16 MiB (store_recorder.h); a summary is one past that, or a hand-made record.
  const auto whole = [&](const nlohmann::json& v, const char* field) {
    RecordedValue value = read_value(v, at(field));
    if (!value.bytes) {
      throw errors::invalid_records(at(std::string(field) + ": the state of " + key_name + " was recorded as a summary (" +
                                       std::to_string(value.size) + " bytes, over what the store's record keeps whole): "
                                       "it cannot be judged"));
    }
    return std::move(*value.bytes);
  };
  while (std::optional<nlohmann::json> line = reader.next()) {
    const nlohmann::json& r = *line;
    try {
      const std::string op = r.at("op").get<std::string>();
      const int64_t t = r.at("t").get<int64_t>();
      if (t < 0) throw errors::invalid_records(at("a time before the Unix epoch"));
      if (!origin) {
        if (op != "start") throw errors::invalid_records(at("the record does not begin with the store's start"));
        origin = t;
      }
      if (t < last_t) throw errors::invalid_records(at("time goes backwards"));
      last_t = t;
      const TimePoint when{Duration{t - *origin}};
      if (op == "cut") {  // the store's cap: the record ends here, judged up to it
        cut = nlohmann::json{{"at_ms", ms(when)}, {"max_bytes", r.at("max_bytes").get<uint64_t>()}, {"line", reader.line()}};
        break;
      }
      if (op == "connect") {
        conn_pid[r.at("conn").get<uint64_t>()] = r.at("pid").is_null() ? std::nullopt : std::optional(r.at("pid").get<int64_t>());
        continue;
      }
      // PyTorch's clients put "/" before every key on the wire (its PrefixStore); dagsim's do too.
      if (!r.contains("key")) continue;
      const std::optional<std::string> k = read_key(r.at("key"), at("key"));
      if (!k || (*k != key && *k != "/" + key)) continue;
      const uint64_t conn = r.at("conn").get<uint64_t>();
      const auto pid = conn_pid.find(conn);
      if (pid == conn_pid.end()) throw errors::invalid_records(at("connection " + std::to_string(conn) + " never connected"));
      const std::string who = pid->second ? "pid " + std::to_string(*pid->second) : "conn " + std::to_string(conn);
      Writer& w = writers[who];
      w.pid = pid->second;
      w.conn = conn;
      w.touched = true;
      const auto commit = [&](const std::optional<runtime::Bytes>& value) {
        ++version;
        life.commits.push_back({when, version, value ? decode(*value) : std::nullopt});
        current = value;
        if (value) version_of[*value] = version;
      };
      if (op == "compare_set") {
        const runtime::Bytes expected = whole(r.at("expected"), "expected");
        const runtime::Bytes desired = whole(r.at("desired"), "desired");
        const bool written = r.at("written").get<bool>();
        if (!written && expected == desired) {  // a read that never writes (dagsim's probe)
          w.last_read = when;
          continue;
        }
        CasWrite write;
        write.t = when;
        write.t_end = when;
        write.wall = when;
        write.read_wall = w.last_read.value_or(when);
        const auto base = version_of.find(expected);
        write.base = expected.empty() && !current ? 0 : base != version_of.end() ? base->second : 0;
        write.written = written;
        if (written) {
          commit(desired);
          write.state = life.commits.back().state;
        }
        write.version = version;
        w.writes.push_back(std::move(write));
        w.last_read = when;  // the reply is the key as it now is
      } else if (op == "set") {
        commit(whole(r.at("value"), "value"));
      } else if (op == "get") {
        w.last_read = when;
      } else if (op == "delete_key" && r.at("deleted").get<bool>()) {
        commit(std::nullopt);
      }
    } catch (const nlohmann::json::exception& e) {
      throw errors::invalid_records(at(printable(e.what(), 400)));
    }
  }
  if (!origin) throw errors::invalid_records(printable(path, kPathMax) + ": empty (no store start)");

  // PyTorch keeps no world size: a round's is its participants at completion.
  for (size_t i = 1; i < life.commits.size(); ++i) {
    const auto& prev = life.commits[i - 1].state;
    auto& s = life.commits[i].state;
    if (s && prev && s->complete && prev->complete && s->round == prev->round) s->world_size = prev->world_size;
  }

  // Each process that touched the key is the agent whose node descriptor holds its pid.
  std::set<NodeDesc> seen;
  for (const Commit& c : life.commits) {
    if (!c.state) continue;
    for (const auto& [node, hb] : c.state->last_heartbeats) seen.insert(node);
    for (const auto& [node, rank] : c.state->participants) seen.insert(node);
  }
  std::map<NodeDesc, AgentLife> agents;
  for (auto& [who, w] : writers) {
    if (!w.touched) continue;
    std::optional<NodeDesc> desc;
    if (w.pid) {
      for (const NodeDesc& n : seen) {
        if (n.pid == static_cast<uint64_t>(*w.pid)) {
          desc = n;
          break;
        }
      }
    }
    if (!desc) {
      if (!w.pid) ++out.unattributed_connections;
      if (w.writes.empty()) continue;
      // A client no descriptor names (another host, or one that never joined): its own agent.
      desc = NodeDesc{who, w.pid ? static_cast<uint64_t>(*w.pid) : 0, 0};
    }
    AgentLife& a = agents[*desc];
    a.desc = *desc;
    a.writes.insert(a.writes.end(), w.writes.begin(), w.writes.end());
  }
  for (const NodeDesc& n : seen) agents[n].desc = n;  // nodes on other hosts: no writes, no deaths
  std::map<uint64_t, uint32_t> index_of_pid;
  for (auto& [desc, a] : agents) {
    a.node = static_cast<uint32_t>(out.history.agents.size());
    std::sort(a.writes.begin(), a.writes.end(), [](const CasWrite& x, const CasWrite& y) { return x.t < y.t; });
    index_of_pid.emplace(desc.pid, a.node);
    out.history.agents.push_back(std::move(a));
  }
  out.spec.store_node = static_cast<uint32_t>(out.history.agents.size());
  out.history.store.push_back(std::move(life));

  // The faults, on the judge's clock.
  RunFacts facts{"finished", "", TimePoint{Duration{last_t - *origin}}, {}};
  nlohmann::json faults = nlohmann::json::array();
  for (const JobFault& f : job.faults) {
    runtime::FaultEvent e;
    e.time = TimePoint{Duration{f.t - *origin}};
    nlohmann::json fj = {{"kind", f.kind}, {"at_ms", ms(e.time)}};
    if (f.pid) {
      fj["pid"] = *f.pid;
      const auto idx = index_of_pid.find(static_cast<uint64_t>(*f.pid));
      if (idx == index_of_pid.end()) {
        fj["note"] = "no agent of the record has this pid";
        faults.push_back(fj);
        continue;
      }
      e.node = idx->second;
      e.kind = f.kind == "kill" ? FaultKind::kill : f.kind == "pause" ? FaultKind::pause : FaultKind::resume;
      if (e.kind == FaultKind::kill) {
        AgentLife& a = out.history.agents[idx->second];
        a.died = a.died ? std::min(*a.died, e.time) : e.time;
      }
    } else {
      e.node = out.spec.store_node;
      e.kind = f.kind == "store_pause" ? FaultKind::pause : FaultKind::resume;
    }
    faults.push_back(fj);
    facts.faults.push_back(e);
  }
  std::stable_sort(facts.faults.begin(), facts.faults.end(),
                   [](const runtime::FaultEvent& a, const runtime::FaultEvent& b) { return a.time < b.time; });
  out.spec.duration = Duration{last_t - *origin} + Duration{1};

  CheckerBounds bounds;
  bounds.expiry = out.spec.settings.expiry();
  bounds.round_trip = std::chrono::milliseconds(2);
  bounds.slack = rendezvous::kDefaultCacheDuration + out.spec.poll_interval + 5 * bounds.round_trip + job.slack;
  out.violations = check_safety(out.spec, out.history, false);
  std::vector<Violation> live = check_liveness(out.spec, bounds, out.history, facts);
  out.violations.insert(out.violations.end(), live.begin(), live.end());
  // A record that ties no write to its client (written from etcd's revisions): S1, whose every
  // commit needs its writer's write, cannot be judged from it.
  std::string not_judged = "S8, S9, L3, L4: what each agent's calls returned is not in a store's record";
  if (!job.writers_known) {
    std::erase_if(out.violations, [](const Violation& v) { return v.invariant == "S1"; });
    not_judged = "S1: the record ties no write to the client that made it (etcd keeps no record of its clients' "
                 "operations); " + not_judged;
  }
  out.format = formats.empty() ? "none" : formats.size() == 1 ? *formats.begin() : "mixed";

  // The report: rounds with who left and whether that node's process still lived.
  nlohmann::json rounds = completed_rounds(out.history);
  nlohmann::json live_expired = nlohmann::json::array();
  for (nlohmann::json& round : rounds) {
    for (nlohmann::json& removed : round["removed"]) {
      const AgentLife* a = nullptr;
      for (const AgentLife& x : out.history.agents) {
        if (x.desc.addr == removed["node"].get<std::string>() && x.desc.pid == removed["pid"].get<uint64_t>()) a = &x;
      }
      const bool alive = a != nullptr && (!a->died || ms(*a->died) > removed["at_ms"].get<double>());
      removed["process_alive"] = alive;
      if (alive && removed["why"] == "expired") live_expired.push_back(removed);
    }
  }
  std::optional<double> first_formation;
  if (!rounds.empty()) first_formation = rounds[0]["completed_ms"].get<double>();
  nlohmann::json reformations = nlohmann::json::array();
  for (const nlohmann::json& f : faults) {
    if (f["kind"] != "kill" || !f.contains("pid")) continue;
    const double at_ms = f["at_ms"].get<double>();
    nlohmann::json r = {{"kill_pid", f["pid"]}, {"kill_ms", at_ms}};
    for (const nlohmann::json& round : rounds) {
      if (round["completed_ms"].get<double>() > at_ms) {
        r["reformed_after_ms"] = round["completed_ms"].get<double>() - at_ms;
        r["round"] = round["round"];
        r["world_size"] = round["world_size"];
        break;
      }
    }
    reformations.push_back(r);
  }
  nlohmann::json agent_list = nlohmann::json::array();
  for (const AgentLife& a : out.history.agents) {
    nlohmann::json j = {{"node", a.desc.addr}, {"pid", a.desc.pid}, {"local_id", a.desc.local_id}, {"writes", a.writes.size()}};
    if (a.died) j["killed_ms"] = ms(*a.died);
    agent_list.push_back(j);
  }
  nlohmann::json violations = nlohmann::json::array();
  for (const Violation& v : out.violations) violations.push_back(to_string(v));
  out.report = {{"records", dir},
                {"run_id", out.spec.settings.run_id},
                {"format", out.format},
                {"commits", out.history.store[0].commits.size()},
                {"agents", agent_list},
                {"faults", faults},
                {"rounds", rounds},
                {"first_formation_ms", first_formation ? nlohmann::json(*first_formation) : nlohmann::json()},
                // The first write of the key: when the first agent began (PyTorch's import time is before it).
                {"first_commit_ms", out.history.store[0].commits.empty() ? nlohmann::json()
                                                                         : nlohmann::json(ms(out.history.store[0].commits[0].t))},
                {"reformations", reformations},
                {"live_expired", live_expired},
                {"unattributed_connections", out.unattributed_connections},
                // The store's cap ended the record here (store_recorder.h): what followed is not judged.
                {"record_cut", cut ? *cut : nlohmann::json()},
                {"not_judged", not_judged},
                {"violations", violations}};
  return out;
}

}  // namespace dagsim::scenarios
