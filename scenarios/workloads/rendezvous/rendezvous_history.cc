// RendezvousHistory (rendezvous_history.h): the records of a rendezvous run, parsed and checked.
#include "scenarios/workloads/rendezvous/rendezvous_history.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/base/error.h"
#include "scenarios/workloads/rendezvous/rendezvous_spec.h"

namespace dagsim::scenarios {

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& what) {
  if (!j.is_object() || !j.contains(key)) throw errors::invalid_records(what + ": missing \"" + key + "\"");
  return j.at(key);
}

// A time in a record: nanoseconds from the run's start or the Unix epoch, never negative and below
// 2^62 (146 years), so that the judge's arithmetic on it (a wall time less the expiry, in
// sanitize) cannot overflow, whatever a record holds.
TimePoint time_of(const nlohmann::json& j, const char* key, const std::string& what) {
  const int64_t ns = integer_from_record<int64_t>(field(j, key, what), what + "." + key);
  if (ns < 0 || ns >= (int64_t{1} << 62)) {
    throw errors::invalid_records(what + "." + key + ": " + std::to_string(ns) + " is not a time (0 to 2^62 ns)");
  }
  return TimePoint{Duration{ns}};
}

std::string string_of(const nlohmann::json& j, const char* key, const std::string& what) {
  const nlohmann::json& v = field(j, key, what);
  if (!v.is_string()) throw errors::invalid_records(what + "." + key + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

const nlohmann::json& array_of(const nlohmann::json& j, const char* key, const std::string& what) {
  const nlohmann::json& v = field(j, key, what);
  if (!v.is_array()) throw errors::invalid_records(what + "." + key + ": expected an array");
  return v;
}

rendezvous::RendezvousState decode_state(const runtime::Bytes& bytes, const std::string& at) {
  try {
    return rendezvous::decode(bytes);
  } catch (const Error& e) {
    throw errors::invalid_records(at + ": " + e.what());
  }
}

}  // namespace

StoreLife read_store_life(const NodeRecord& r, const std::string& what) {
  StoreLife life;
  life.incarnation = r.incarnation;
  const nlohmann::json& history = array_of(r.data, "history", what);
  for (size_t i = 0; i < history.size(); ++i) {
    const std::string at = what + ".history[" + std::to_string(i) + "]";
    Commit c;
    c.t = time_of(history[i], "t", at);
    c.version = integer_from_record<uint64_t>(field(history[i], "v", at), at + ".v");
    const nlohmann::json& s = field(history[i], "s", at);
    if (!s.is_null()) {
      if (!s.is_string()) throw errors::invalid_records(at + ".s: expected a hex string or null");
      c.state = decode_state(from_hex(s.get<std::string>(), at + ".s"), at + ".s");
    }
    if (!life.commits.empty() && c.state && c.version <= life.commits.back().version) {
      throw errors::invalid_records(at + ": version " + std::to_string(c.version) + " does not rise");
    }
    if (!life.commits.empty() && c.t < life.commits.back().t) throw errors::invalid_records(at + ": time goes back");
    life.commits.push_back(std::move(c));
  }
  return life;
}

AgentLife read_agent_life(const NodeRecord& r, const std::string& what) {
  AgentLife life;
  life.node = r.node;
  life.incarnation = r.incarnation;
  const nlohmann::json& desc = field(r.data, "node", what);
  if (!desc.is_array() || desc.size() != 3 || !desc[0].is_string()) {
    throw errors::invalid_records(what + ".node: expected [addr, pid, local_id]");
  }
  life.desc.addr = desc[0].get<std::string>();
  life.desc.pid = integer_from_record<uint64_t>(desc[1], what + ".node[1]");
  life.desc.local_id = integer_from_record<uint64_t>(desc[2], what + ".node[2]");
  const nlohmann::json& events = array_of(r.data, "events", what);
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string at = what + ".events[" + std::to_string(i) + "]";
    const nlohmann::json& j = events[i];
    AgentEvent e;
    e.op = string_of(j, "op", at);
    e.start = time_of(j, "start", at);
    if (j.contains("t")) {
      e.end = time_of(j, "t", at);
      if (*e.end < e.start) throw errors::invalid_records(at + ": ends before it starts");
    }
    if (j.contains("wall")) e.wall = time_of(j, "wall", at);
    const auto number = [&](const char* key, uint64_t& out) {
      if (j.contains(key)) out = integer_from_record<uint64_t>(j.at(key), at + "." + key);
    };
    number("round", e.round);
    number("rank", e.rank);
    number("world", e.world);
    number("version", e.version);
    number("waiting", e.waiting);
    if (j.contains("ok")) {
      if (!j.at("ok").is_boolean()) throw errors::invalid_records(at + ".ok: expected a boolean");
      e.ok = j.at("ok").get<bool>();
    }
    if (j.contains("error")) {
      e.error = string_of(j, "error", at);
      e.message = j.contains("message") ? string_of(j, "message", at) : std::string();
    }
    if (!life.events.empty() && e.start < life.events.back().start) throw errors::invalid_records(at + ": out of order");
    life.events.push_back(std::move(e));
  }
  const nlohmann::json& writes = array_of(r.data, "writes", what);
  for (size_t i = 0; i < writes.size(); ++i) {
    const std::string at = what + ".writes[" + std::to_string(i) + "]";
    const nlohmann::json& j = writes[i];
    CasWrite w;
    w.t = time_of(j, "t", at);
    w.wall = time_of(j, "wall", at);
    w.read_wall = time_of(j, "read_wall", at);
    w.base = integer_from_record<uint64_t>(field(j, "base", at), at + ".base");
    if (j.contains("written")) {
      if (!j.at("written").is_boolean()) throw errors::invalid_records(at + ".written: expected a boolean");
      w.written = j.at("written").get<bool>();
      w.version = integer_from_record<uint64_t>(field(j, "version", at), at + ".version");
      w.t_end = time_of(j, "t_end", at);
    }
    if (j.contains("d")) {
      if (!j.at("d").is_string()) throw errors::invalid_records(at + ".d: expected a hex state");
      w.sent = decode_state(from_hex(j.at("d").get<std::string>(), at + ".d"), at + ".d");
      if (w.written == true) w.state = w.sent;
    }
    if (j.contains("s")) {  // records of older builds: the state of a write that committed
      if (w.written != true || !j.at("s").is_string()) throw errors::invalid_records(at + ".s: a hex state, of a write that committed");
      w.state = decode_state(from_hex(j.at("s").get<std::string>(), at + ".s"), at + ".s");
    }
    life.writes.push_back(std::move(w));
  }
  return life;
}

std::string to_hex(const runtime::Bytes& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kHexDigits[b >> 4]);
    out.push_back(kHexDigits[b & 15]);
  }
  return out;
}

runtime::Bytes from_hex(const std::string& text, const std::string& what) {
  if (text.size() % 2 != 0) throw errors::invalid_records(what + ": odd number of hex digits");
  const auto digit = [&](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    throw errors::invalid_records(what + ": not a lowercase hex digit: '" + std::string(1, c) + "'");
  };
  runtime::Bytes out(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  return out;
}

const Commit* StoreLife::at(TimePoint t) const {
  const Commit* found = nullptr;
  for (const Commit& c : commits) {
    if (c.t > t) break;
    found = &c;
  }
  return found;
}

const Commit* StoreLife::find(uint64_t version) const {
  for (const Commit& c : commits) {
    if (c.version == version && c.state) return &c;
  }
  return nullptr;
}

const AgentLife* RendezvousHistory::agent(const rendezvous::NodeDesc& desc) const {
  for (const AgentLife& a : agents) {
    if (a.desc == desc) return &a;
  }
  return nullptr;
}

std::pair<const AgentLife*, const CasWrite*> RendezvousHistory::writer_of(const Commit& c) const {
  for (const AgentLife& a : agents) {
    for (const CasWrite& w : a.writes) {
      if (w.written == true && w.version == c.version && w.t <= c.t && c.t <= *w.t_end) return {&a, &w};
    }
  }
  return {nullptr, nullptr};
}

std::vector<std::optional<TimePoint>> incarnation_ends(const std::vector<runtime::FaultEvent>& history, uint32_t node) {
  using K = runtime::FaultEvent::Kind;
  std::vector<std::optional<TimePoint>> ends;
  bool alive = false;
  for (const runtime::FaultEvent& e : history) {
    if (e.node != node) continue;
    if (e.kind == K::start || e.kind == K::restart) {
      ends.emplace_back();
      alive = true;
    } else if ((e.kind == K::kill || e.kind == K::crash) && alive) {
      ends.back() = e.time;
      alive = false;
    }
  }
  return ends;
}

namespace {

// Over etcd no node sees the store's own order of commits: the agents' acknowledged writes are
// its history (each carries the state it wrote and the mod revision etcd gave it), one life, in
// version order. A commit is placed at its write's send time, or just after the commit before it,
// whichever is later: never after it really happened.
//
// A write whose outcome never came back (its reply lost as etcd was killed, or its fiber cancelled
// while it waited for etcd to return) may have committed. When the run proves that a version the
// acknowledged writes lack exists (a later write was based on it, a failed write was told it was
// current, an agent's call returned it) and exactly one such write could have made it (it was
// sent on the commit just before), that write is placed there, marked inferred. With two or more
// candidates the history keeps its hole and the checker says so: no guess is made.
StoreLife history_from_writes(std::vector<AgentLife>& agents) {
  std::map<uint64_t, Commit> by_version;
  std::set<uint64_t> referenced;
  for (const AgentLife& a : agents) {
    for (const CasWrite& w : a.writes) {
      if (w.written == true && w.state && w.version) by_version[*w.version] = Commit{w.t, *w.version, w.state};
      if (w.base > 0) referenced.insert(w.base);
      if (w.written == false && w.version && *w.version > 0) referenced.insert(*w.version);
    }
    for (const AgentEvent& e : a.events) {
      if (e.succeeded() && e.version > 0) referenced.insert(e.version);
    }
  }
  std::vector<std::pair<CasWrite*, uint64_t>> inferred;
  for (const uint64_t v : referenced) {
    if (by_version.contains(v)) continue;
    const auto below = by_version.lower_bound(v);
    const uint64_t before = below == by_version.begin() ? 0 : std::prev(below)->first;
    std::vector<CasWrite*> candidates;
    for (AgentLife& a : agents) {
      for (CasWrite& w : a.writes) {
        if (!w.written.has_value() && w.sent && w.base == before) candidates.push_back(&w);
      }
    }
    if (candidates.size() != 1) continue;
    CasWrite& w = *candidates.front();
    w.written = true;
    w.version = v;
    w.state = w.sent;
    w.inferred = true;
    by_version[v] = Commit{w.t, v, w.state};
    inferred.emplace_back(&w, v);
  }
  StoreLife life;
  for (auto& [version, c] : by_version) {
    if (!life.commits.empty()) c.t = std::max(c.t, life.commits.back().t);
    life.commits.push_back(std::move(c));
  }
  // An inferred write's call ended when its commit is placed, at the latest.
  for (auto& [w, v] : inferred) w->t_end = life.find(v)->t;
  return life;
}

}  // namespace

RendezvousHistory read_history(const Scenario& scenario, const RunRecords& records) {
  RendezvousHistory h;
  const RendezvousSpec& spec = scenario.workload.as<RendezvousSpec>();
  const bool etcd = spec.backend == RendezvousSpec::Backend::etcd;
  const uint32_t store_node = spec.store_node;
  for (uint32_t node = 0; node < scenario.cluster.nodes; ++node) {
    const std::vector<std::optional<TimePoint>> ends = incarnation_ends(records.fault_history, node);
    for (const NodeRecord* r : records.records_of(node)) {
      const std::string what = scenario.cluster.node_name(node) + "." + std::to_string(r->incarnation);
      if (node == store_node) {
        if (!etcd) h.store.push_back(read_store_life(*r, what));
        if (etcd && r->data.contains("store_outages")) {
          const nlohmann::json& outages = array_of(r->data, "store_outages", what);
          for (size_t i = 0; i < outages.size(); ++i) {
            const std::string at = what + ".store_outages[" + std::to_string(i) + "]";
            const StoreOutage o{time_of(outages[i], "down", at), time_of(outages[i], "up", at)};
            if (o.up < o.down) throw errors::invalid_records(at + ": up before down");
            if (!h.store_outages.empty() && o.down < h.store_outages.back().up) {
              throw errors::invalid_records(at + ": begins before the outage before it ended");
            }
            h.store_outages.push_back(o);
          }
        }
        continue;
      }
      AgentLife life = read_agent_life(*r, what);
      if (r->incarnation < ends.size()) life.died = ends[r->incarnation];
      h.agents.push_back(std::move(life));
    }
  }
  if (etcd) h.store.push_back(history_from_writes(h.agents));
  return h;
}

}  // namespace dagsim::scenarios
