// PyTorch's stored rendezvous state (pytorch_state.h): a restricted unpickler.
#include "scenarios/workloads/rendezvous/pytorch_state.h"

#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "core/base/error.h"
#include "net/etcd/etcd_codec.h"

namespace dagsim::scenarios {

namespace {

using rendezvous::NodeDesc;
using rendezvous::RendezvousState;

constexpr std::string_view kModule = "torch.distributed.elastic.rendezvous.dynamic_rendezvous";

[[noreturn]] void fail(const std::string& what) { throw errors::protocol_error("PyTorch rendezvous state: " + what); }

// The values a state's pickle builds. Containers are shared: the memo and the stack may hold the
// same dict, and SETITEMS fills it where both see it.
struct Value;
using Ref = std::shared_ptr<Value>;
struct Global {
  std::string module, name;
};
struct Object {
  std::string cls;  // "_RendezvousState", "_NodeDesc"
  std::vector<std::pair<std::string, Ref>> attrs;
};
struct Datetime {
  int64_t ns = 0;
};
struct Mark {};
struct Value {
  std::variant<std::monostate, bool, int64_t, std::string, std::vector<uint8_t>, std::vector<Ref> /*tuple*/,
               std::vector<std::pair<Ref, Ref>> /*dict*/, Global, Object, Datetime, Mark>
      v;
  bool is_set = false;  // the tuple alternative holds a set's (and a list's) items too
};

Ref make(auto x) {
  auto r = std::make_shared<Value>();
  r->v = std::move(x);
  return r;
}

class Unpickler {
 public:
  explicit Unpickler(std::span<const uint8_t> in, int64_t origin) : in_(in), origin_(origin) {}

  Ref run() {
    for (;;) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80: (void)byte(); break;              // PROTO
        case 0x95: (void)bytes(8); break;            // FRAME: a length hint only
        case 0x94: memo_.push_back(top()); break;    // MEMOIZE
        case 'q': put(byte()); break;                // BINPUT
        case 'r': put(u32()); break;                 // LONG_BINPUT
        case 'h': push(get(byte())); break;          // BINGET
        case 'j': push(get(u32())); break;           // LONG_BINGET
        case 0x8c: push(make(str(byte()))); break;   // SHORT_BINUNICODE
        case 'X': push(make(str(u32()))); break;     // BINUNICODE
        case 'C': push(make(blob(byte()))); break;   // SHORT_BINBYTES
        case 'B': push(make(blob(u32()))); break;    // BINBYTES
        case 'K': push(make(int64_t{byte()})); break;  // BININT1
        case 'M': {                                  // BININT2
          const auto b = bytes(2);
          push(make(int64_t{b[0] | (b[1] << 8)}));
          break;
        }
        case 'J': push(make(int64_t{static_cast<int32_t>(u32())})); break;  // BININT
        case 0x8a: push(make(long1())); break;                              // LONG1
        case 0x88: push(make(true)); break;                                 // NEWTRUE
        case 0x89: push(make(false)); break;                                // NEWFALSE
        case 'N': push(make(std::monostate{})); break;                      // NONE
        case '(': push(make(Mark{})); break;                                // MARK
        case ')': push(make(std::vector<Ref>{})); break;                    // EMPTY_TUPLE
        case 0x85: tuple(1); break;                                         // TUPLE1
        case 0x86: tuple(2); break;                                         // TUPLE2
        case 0x87: tuple(3); break;                                         // TUPLE3
        case 't': push(make(pop_to_mark())); break;                         // TUPLE
        case '}': push(make(std::vector<std::pair<Ref, Ref>>{})); break;    // EMPTY_DICT
        case 0x8f: {                                                        // EMPTY_SET
          Ref s = make(std::vector<Ref>{});
          s->is_set = true;
          push(s);
          break;
        }
        case 's': {  // SETITEM
          Ref value = pop(), key = pop();
          dict(top()).emplace_back(std::move(key), std::move(value));
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<Ref> items = pop_to_mark();
          if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
          auto& d = dict(top());
          for (size_t i = 0; i < items.size(); i += 2) d.emplace_back(items[i], items[i + 1]);
          break;
        }
        case 0x90: {  // ADDITEMS
          std::vector<Ref> items = pop_to_mark();
          Ref s = top();
          if (!s->is_set) fail("ADDITEMS to something that is not a set");
          auto& v = std::get<std::vector<Ref>>(s->v);
          v.insert(v.end(), items.begin(), items.end());
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Ref name = pop(), module = pop();
          push(make(global(text(module, "a global's module"), text(name, "a global's name"))));
          break;
        }
        case 'c': {  // GLOBAL (protocols 0-2)
          std::string module = line(), name = line();
          push(make(global(std::move(module), std::move(name))));
          break;
        }
        case 0x81: {  // NEWOBJ
          Ref args = pop(), cls = pop();
          const Global g = as_global(cls);
          if (g.module == "datetime" || !tuple_items(args).empty()) fail("NEWOBJ of " + g.name + " with arguments");
          push(make(Object{g.name, {}}));
          break;
        }
        case 'R': {  // REDUCE: only datetime.datetime(bytes10)
          Ref args = pop(), callable = pop();
          const Global g = as_global(callable);
          if (g.module != "datetime") fail("REDUCE calls " + g.module + "." + g.name);
          const std::vector<Ref>& a = tuple_items(args);
          if (a.size() != 1 || !std::holds_alternative<std::vector<uint8_t>>(a[0]->v)) {
            fail("a datetime with a time zone or in another form than its 10 bytes");
          }
          push(make(datetime(std::get<std::vector<uint8_t>>(a[0]->v))));
          break;
        }
        case 'b': {  // BUILD
          Ref state = pop();
          Ref obj = top();
          if (!std::holds_alternative<Object>(obj->v)) fail("BUILD on something that is not an object");
          auto& attrs = std::get<Object>(obj->v).attrs;
          for (auto& [k, v] : dict(state)) attrs.emplace_back(text(k, "an attribute's name"), v);
          break;
        }
        case ']': push(make(std::vector<Ref>{})); break;  // EMPTY_LIST: items as a tuple's
        case 'a': {                                         // APPEND
          Ref v = pop();
          std::get<std::vector<Ref>>(list(top())->v).push_back(std::move(v));
          break;
        }
        case 'e': {  // APPENDS
          std::vector<Ref> items = pop_to_mark();
          auto& l = std::get<std::vector<Ref>>(list(top())->v);
          l.insert(l.end(), items.begin(), items.end());
          break;
        }
        case '.': {  // STOP
          Ref result = pop();
          if (!stack_.empty()) fail("values left on the stack at STOP");
          return result;
        }
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("opcode ") + hex + " at byte " + std::to_string(pos_ - 1) + " is not one a rendezvous state uses");
        }
      }
    }
  }

 private:
  uint8_t byte() {
    if (pos_ >= in_.size()) fail("truncated at byte " + std::to_string(pos_));
    return in_[pos_++];
  }
  std::span<const uint8_t> bytes(size_t n) {
    if (n > in_.size() - pos_) fail("truncated: " + std::to_string(n) + " bytes wanted at byte " + std::to_string(pos_));
    auto out = in_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  uint32_t u32() {
    const auto b = bytes(4);
    return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
  }
  int64_t long1() {
    const uint8_t n = byte();
    if (n > 8) fail("an integer of " + std::to_string(n) + " bytes");
    const auto b = bytes(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{b[i]} << (8 * i);
    if (n > 0 && n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }
  std::string str(size_t n) {
    const auto b = bytes(n);
    return std::string(b.begin(), b.end());
  }
  std::vector<uint8_t> blob(size_t n) {
    const auto b = bytes(n);
    return {b.begin(), b.end()};
  }
  std::string line() {
    std::string out;
    for (uint8_t c; (c = byte()) != '\n';) out.push_back(static_cast<char>(c));
    return out;
  }
  void push(Ref r) {
    if (stack_.size() >= kMaxStack) fail("nested deeper than a rendezvous state");
    stack_.push_back(std::move(r));
  }
  Ref pop() {
    if (stack_.empty() || std::holds_alternative<Mark>(stack_.back()->v)) fail("stack underflow at byte " + std::to_string(pos_));
    Ref r = std::move(stack_.back());
    stack_.pop_back();
    return r;
  }
  Ref top() {
    if (stack_.empty()) fail("stack underflow at byte " + std::to_string(pos_));
    return stack_.back();
  }
  std::vector<Ref> pop_to_mark() {
    std::vector<Ref> out;
    for (;;) {
      if (stack_.empty()) fail("no MARK before byte " + std::to_string(pos_));
      Ref r = std::move(stack_.back());
      stack_.pop_back();
      if (std::holds_alternative<Mark>(r->v)) break;
      out.push_back(std::move(r));
    }
    return {out.rbegin(), out.rend()};
  }
  void tuple(size_t n) {
    std::vector<Ref> items(n);
    for (size_t i = n; i-- > 0;) items[i] = pop();
    push(make(std::move(items)));
  }
  void put(size_t index) {
    if (index > memo_.size() + kMaxStack) fail("memo index " + std::to_string(index) + " out of range");
    if (memo_.size() <= index) memo_.resize(index + 1);
    memo_[index] = top();
  }
  Ref get(size_t index) {
    if (index >= memo_.size() || !memo_[index]) fail("memo index " + std::to_string(index) + " was never stored");
    return memo_[index];
  }
  static std::vector<std::pair<Ref, Ref>>& dict(const Ref& r) {
    if (!std::holds_alternative<std::vector<std::pair<Ref, Ref>>>(r->v)) fail("items set on something that is not a dict");
    return std::get<std::vector<std::pair<Ref, Ref>>>(r->v);
  }
  static const Ref& list(const Ref& r) {
    if (!std::holds_alternative<std::vector<Ref>>(r->v) || r->is_set) fail("APPEND to something that is not a list");
    return r;
  }
  static const std::vector<Ref>& tuple_items(const Ref& r) {
    if (!std::holds_alternative<std::vector<Ref>>(r->v)) fail("arguments that are not a tuple");
    return std::get<std::vector<Ref>>(r->v);
  }
  static std::string text(const Ref& r, const char* what) {
    if (!std::holds_alternative<std::string>(r->v)) fail(std::string(what) + " that is not a string");
    return std::get<std::string>(r->v);
  }
  static Global as_global(const Ref& r) {
    if (!std::holds_alternative<Global>(r->v)) fail("a call of something that is not a class");
    return std::get<Global>(r->v);
  }
  // Only the three classes a state holds; nothing else is ever named, let alone called.
  static Global global(std::string module, std::string name) {
    const bool ours = module == kModule && (name == "_RendezvousState" || name == "_NodeDesc");
    const bool datetime = module == "datetime" && name == "datetime";
    if (!ours && !datetime) fail("refuses the global " + module + "." + name + " (only a rendezvous state's classes are read)");
    return {std::move(module), std::move(name)};
  }
  // datetime's pickled form: year (2 bytes, big-endian), month, day, hour, minute, second,
  // microsecond (3 bytes, big-endian).
  Datetime datetime(const std::vector<uint8_t>& b) const {
    if (b.size() != 10) fail("a datetime of " + std::to_string(b.size()) + " bytes, not 10");
    const int year = b[0] << 8 | b[1];
    const unsigned micro = unsigned{b[7]} << 16 | unsigned{b[8]} << 8 | b[9];
    if (year < 1 || b[2] < 1 || b[2] > 12 || b[3] < 1 || b[3] > 31 || b[4] > 23 || b[5] > 59 || b[6] > 59 || micro > 999'999) {
      fail("a datetime out of range");
    }
    return {unix_ns(year, b[2], b[3], b[4], b[5], b[6], micro) - origin_};
  }

  static constexpr size_t kMaxStack = 4096;
  std::span<const uint8_t> in_;
  int64_t origin_;
  size_t pos_ = 0;
  std::vector<Ref> stack_;
  std::vector<Ref> memo_;
};

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
runtime::TimePoint as_time(const Ref& r, const std::string& what) {
  if (!std::holds_alternative<Datetime>(r->v)) fail(what + " is not a datetime");
  return runtime::TimePoint{runtime::Duration{std::get<Datetime>(r->v).ns}};
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
const std::vector<std::pair<Ref, Ref>>& as_dict(const Ref& r, const std::string& what) {
  if (!std::holds_alternative<std::vector<std::pair<Ref, Ref>>>(r->v)) fail(what + " is not a dict");
  return std::get<std::vector<std::pair<Ref, Ref>>>(r->v);
}
std::set<NodeDesc> as_node_set(const Ref& r, const std::string& what) {
  if (!r->is_set) fail(what + " is not a set");
  std::set<NodeDesc> out;
  for (const Ref& n : std::get<std::vector<Ref>>(r->v)) out.insert(as_node(n, what + " item"));
  return out;
}

}  // namespace

int64_t unix_ns(int year, unsigned month, unsigned day, unsigned hour, unsigned minute, unsigned second, unsigned microsecond) {
  // Days from 1970-01-01 (Howard Hinnant's days_from_civil, from its published derivation).
  year -= month <= 2;
  const int era = (year >= 0 ? year : year - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(year - era * 400);
  const unsigned doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = int64_t{era} * 146097 + static_cast<int64_t>(doe) - 719468;
  const int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * 1'000'000'000 + int64_t{microsecond} * 1000;
}

RendezvousState decode_pytorch_pickle(std::span<const uint8_t> pickle, int64_t origin_ns) {
  if (pickle.size() > kMaxStateBytes) fail("of " + std::to_string(pickle.size()) + " bytes, over the limit");
  const Ref root = Unpickler(pickle, origin_ns).run();
  const Object& o = as_object(root, "_RendezvousState", "the pickled object");
  RendezvousState s;
  const int64_t round = as_int(attr(o, "round"), "round");
  if (round < 0) fail("round is negative");
  s.round = static_cast<uint64_t>(round);
  s.complete = as_bool(attr(o, "complete"), "complete");
  const Ref& deadline = attr(o, "deadline");
  if (!std::holds_alternative<std::monostate>(deadline->v)) s.deadline = as_time(deadline, "deadline");
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
    if (!s.last_heartbeats.emplace(as_node(k, "a heartbeat's node"), as_time(v, "a heartbeat")).second) fail("a heartbeat twice");
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
  const runtime::Duration shift{origin_ns};
  if (s.deadline) *s.deadline = *s.deadline - shift;
  for (auto& [node, hb] : s.last_heartbeats) hb = hb - shift;
  return s;
}

}  // namespace dagsim::scenarios
