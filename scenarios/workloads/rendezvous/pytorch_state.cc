// PyTorch's stored rendezvous state (pytorch_state.h), read from the values the restricted unpickler
// (restricted_unpickler.h) builds.
#include "scenarios/workloads/rendezvous/pytorch_state.h"

#include <map>
#include <variant>
#include <vector>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/etcd/etcd_codec.h"

namespace dagsim::scenarios {

namespace {

using rendezvous::NodeDesc;
using rendezvous::RendezvousState;

constexpr std::string_view kModule = "torch.distributed.elastic.rendezvous.dynamic_rendezvous";

[[noreturn]] void fail(const std::string& what) { throw errors::protocol_error("PyTorch rendezvous state: " + what); }

using Ref = PickleRef;
using Object = PickleObject;

constexpr PickleAllowedGlobal kAllowed[] = {{kModule, "_RendezvousState"}, {kModule, "_NodeDesc"}};

// Reading the built values as a state.
const Ref& attr(const Object& o, std::string_view name) {
  for (const auto& [k, v] : o.attrs) {
    if (k == name) return v;
  }
  fail(o.cls + " has no " + std::string(name));
}
int64_t as_int(const Ref& r, const std::string& what) {
  if (!std::holds_alternative<int64_t>(r->v)) fail(what + " is not an integer");
  return std::get<int64_t>(r->v);
}
bool as_bool(const Ref& r, const std::string& what) {
  if (!std::holds_alternative<bool>(r->v)) fail(what + " is not a bool");
  return std::get<bool>(r->v);
}
// A datetime on the judge's clock: nanoseconds since `origin`.
runtime::TimePoint as_time(const Ref& r, const std::string& what, int64_t origin) {
  if (!std::holds_alternative<PickleDatetime>(r->v)) fail(what + " is not a datetime");
  int64_t ns = 0;
  if (__builtin_sub_overflow(std::get<PickleDatetime>(r->v).unix_ns, origin, &ns)) fail(what + " is too far from the record's start");
  return runtime::TimePoint{runtime::Duration{ns}};
}
const Object& as_object(const Ref& r, const std::string& cls, const std::string& what) {
  if (!std::holds_alternative<Object>(r->v) || std::get<Object>(r->v).cls != cls) fail(what + " is not a " + cls);
  return std::get<Object>(r->v);
}
NodeDesc as_node(const Ref& r, const std::string& what) {
  const Object& o = as_object(r, "_NodeDesc", what);
  const Ref& fqdn = attr(o, "fqdn");
  if (!std::holds_alternative<std::string>(fqdn->v)) fail(what + ".fqdn is not a string");
  NodeDesc node{std::get<std::string>(fqdn->v), 0, 0};
  if (node.addr.size() > rendezvous::kMaxNodeAddr) fail(what + ".fqdn is longer than a host name");
  const int64_t pid = as_int(attr(o, "pid"), what + ".pid"), local_id = as_int(attr(o, "local_id"), what + ".local_id");
  if (pid < 0 || local_id < 0) fail(what + " has a negative pid or local_id");
  node.pid = static_cast<uint64_t>(pid);
  node.local_id = static_cast<uint64_t>(local_id);
  return node;
}
const PickleDict& as_dict(const Ref& r, const std::string& what) {
  if (!std::holds_alternative<PickleDict>(r->v)) fail(what + " is not a dict");
  return std::get<PickleDict>(r->v);
}
std::set<NodeDesc> as_node_set(const Ref& r, const std::string& what) {
  if (!r->is_set) fail(what + " is not a set");
  std::set<NodeDesc> out;
  for (const Ref& n : std::get<PickleItems>(r->v)) out.insert(as_node(n, what + " item"));
  return out;
}

}  // namespace

RendezvousState decode_pytorch_pickle(std::span<const uint8_t> pickle, int64_t origin_ns) {
  if (pickle.size() > kMaxStateBytes) fail("of " + std::to_string(pickle.size()) + " bytes, over the limit");
  Ref root;
  try {
    root = unpickle(pickle, kAllowed);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::protocol_error) throw;
    fail(e.detail());
  }
  const Object& o = as_object(root, "_RendezvousState", "the pickled object");
  RendezvousState s;
  const int64_t round = as_int(attr(o, "round"), "round");
  if (round < 0) fail("round is negative");
  s.round = static_cast<uint64_t>(round);
  s.complete = as_bool(attr(o, "complete"), "complete");
  const Ref& deadline = attr(o, "deadline");
  if (!std::holds_alternative<std::monostate>(deadline->v)) s.deadline = as_time(deadline, "deadline", origin_ns);
  s.closed = as_bool(attr(o, "closed"), "closed");
  for (const auto& [k, v] : as_dict(attr(o, "participants"), "participants")) {
    const int64_t rank = as_int(v, "a participant's rank");
    if (rank < 0 || rank > int64_t{UINT32_MAX}) fail("a participant's rank is out of range");
    if (!s.participants.emplace(as_node(k, "a participant"), static_cast<uint32_t>(rank)).second) fail("a participant twice");
  }
  s.wait_list = as_node_set(attr(o, "wait_list"), "wait_list");
  for (const auto& [k, v] : o.attrs) {
    if (k == "redundancy_list") s.redundancy_list = as_node_set(v, "redundancy_list");  // PyTorch 2.4 and later
  }
  for (const auto& [k, v] : as_dict(attr(o, "last_heartbeats"), "last_heartbeats")) {
    if (!s.last_heartbeats.emplace(as_node(k, "a heartbeat's node"), as_time(v, "a heartbeat", origin_ns)).second) fail("a heartbeat twice");
  }
  // PyTorch keeps no world size: the round's is its participants at completion (the history fixes
  // it for later states of the same round, which may have lost members).
  s.world_size = s.complete ? static_cast<uint32_t>(s.participants.size()) : 0;
  return s;
}

std::optional<RendezvousState> decode_stored_state(std::span<const uint8_t> value, int64_t origin_ns, std::string* format) {
  const std::string_view text(reinterpret_cast<const char*>(value.data()), value.size());
  if (text == kPyTorchNullSentinel) {
    if (format) *format = "pytorch";
    return std::nullopt;
  }
  // pickle protocol 2 or later starts with 0x80, whose base64 starts with "g".
  if (!text.empty() && text[0] == 'g') {
    if (format) *format = "pytorch";
    const runtime::Bytes pickle = net::etcd::base64_decode_bytes(text);
    return decode_pytorch_pickle(pickle, origin_ns);
  }
  if (format) *format = "dagsim";
  RendezvousState s = rendezvous::decode(value);
  // dagsim's times are Unix-epoch nanoseconds too (RealClock::wall_now): to the judge's zero.
  const auto shifted = [&](runtime::TimePoint t, const char* what) {
    int64_t ns = 0;
    if (__builtin_sub_overflow(t.ns(), origin_ns, &ns)) {
      throw errors::protocol_error(std::string("dagsim rendezvous state: ") + what + " is too far from the record's start");
    }
    return runtime::TimePoint{runtime::Duration{ns}};
  };
  if (s.deadline) *s.deadline = shifted(*s.deadline, "the deadline");
  for (auto& [node, hb] : s.last_heartbeats) hb = shifted(hb, "a heartbeat");
  return s;
}

}  // namespace dagsim::scenarios
