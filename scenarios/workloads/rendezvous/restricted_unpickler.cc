// The restricted unpickler (restricted_unpickler.h).
#include "scenarios/workloads/rendezvous/restricted_unpickler.h"

#include <algorithm>
#include <cstdio>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::scenarios {

namespace {

using Ref = PickleRef;

// What one value costs the budget beyond its bytes (its header, as a reader would hold it), and
// what one memo slot or container item costs.
constexpr size_t kValueBytes = sizeof(PickleValue) + 16;
constexpr size_t kSlotBytes = 16;

class Unpickler {
 public:
  Unpickler(std::span<const uint8_t> in, std::span<const PickleAllowedGlobal> allowed)
      : in_(in), allowed_(allowed), budget_(decoded_budget(in.size())) {}

  size_t spent() const { return spent_; }

  Ref run() {
    for (;;) {
      op_at_ = pos_;
      const uint8_t op = byte();
      switch (op) {
        case 0x80: (void)byte(); break;             // PROTO
        case 0x95: (void)bytes(8); break;           // FRAME: a length hint only
        case 0x94: put(memo_.size()); break;        // MEMOIZE
        case 'q': put(byte()); break;               // BINPUT
        case 'r': put(u32()); break;                // LONG_BINPUT
        case 'h': get(byte()); break;               // BINGET
        case 'j': get(u32()); break;                // LONG_BINGET
        case 0x8c: push(text(byte())); break;       // SHORT_BINUNICODE
        case 'X': push(text(u32())); break;         // BINUNICODE
        case 'C': push(blob(byte())); break;        // SHORT_BINBYTES
        case 'B': push(blob(u32())); break;         // BINBYTES
        case 'K': push(fresh(int64_t{byte()})); break;  // BININT1
        case 'M': {                                 // BININT2
          const auto b = bytes(2);
          push(fresh(int64_t{b[0] | (b[1] << 8)}));
          break;
        }
        case 'J': push(fresh(int64_t{static_cast<int32_t>(u32())})); break;  // BININT
        case 0x8a: push(fresh(long1())); break;                              // LONG1
        case 0x88: push(fresh(true)); break;                                 // NEWTRUE
        case 0x89: push(fresh(false)); break;                                // NEWFALSE
        case 'N': push(fresh(std::monostate{})); break;                      // NONE
        case '(': push(fresh(PickleMark{})); break;                          // MARK
        case ')': push(container(PickleItems{})); break;                     // EMPTY_TUPLE
        case ']': push(container(PickleItems{})); break;                     // EMPTY_LIST
        case '}': push(container(PickleDict{})); break;                      // EMPTY_DICT
        case 0x8f: {                                                         // EMPTY_SET
          Ref s = container(PickleItems{});
          s->is_set = true;
          push(std::move(s));
          break;
        }
        case 0x85: tuple(1); break;                   // TUPLE1
        case 0x86: tuple(2); break;                   // TUPLE2
        case 0x87: tuple(3); break;                   // TUPLE3
        case 't': {                                   // TUPLE
          PickleItems items = pop_to_mark();
          Ref t = container(PickleItems{});
          for (Ref& item : items) add_item(t, std::move(item));
          push(std::move(t));
          break;
        }
        case 's': {  // SETITEM
          Ref value = pop(), key = pop();
          add_pair(top(), std::move(key), std::move(value));
          break;
        }
        case 'u': {  // SETITEMS
          PickleItems items = pop_to_mark();
          if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
          const Ref d = top();
          for (size_t i = 0; i < items.size(); i += 2) add_pair(d, std::move(items[i]), std::move(items[i + 1]));
          break;
        }
        case 0x90: {  // ADDITEMS
          PickleItems items = pop_to_mark();
          const Ref s = top();
          if (!s->is_set) fail("ADDITEMS to something that is not a set");
          for (Ref& item : items) add_item(s, std::move(item));
          break;
        }
        case 'a': {  // APPEND
          Ref v = pop();
          add_item(list(top()), std::move(v));
          break;
        }
        case 'e': {  // APPENDS
          PickleItems items = pop_to_mark();
          const Ref l = list(top());
          for (Ref& item : items) add_item(l, std::move(item));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Ref name = pop(), module = pop();
          push(global(as_text(module, "a global's module"), as_text(name, "a global's name")));
          break;
        }
        case 'c': {  // GLOBAL (protocols 0-2)
          std::string module = line(), name = line();
          push(global(std::move(module), std::move(name)));
          break;
        }
        case 0x81: {  // NEWOBJ
          Ref args = pop(), cls = pop();
          const PickleGlobal& g = as_global(cls);
          if (g.module == "datetime" || !items_of(args).empty()) fail("NEWOBJ of " + printable(g.name) + " with arguments");
          push(container(PickleObject{g.name, {}}));
          break;
        }
        case 'R': {  // REDUCE: only datetime.datetime(bytes10)
          Ref args = pop(), callable = pop();
          const PickleGlobal& g = as_global(callable);
          if (g.module != "datetime") fail("REDUCE calls " + printable(g.module + "." + g.name));
          const PickleItems& a = items_of(args);
          if (a.size() != 1 || !std::holds_alternative<std::vector<uint8_t>>(a[0]->v)) {
            fail("a datetime with a time zone or in another form than its 10 bytes");
          }
          push(fresh(datetime(std::get<std::vector<uint8_t>>(a[0]->v))));
          break;
        }
        case 'b': {  // BUILD
          Ref state = pop();
          const Ref obj = top();
          if (!std::holds_alternative<PickleObject>(obj->v)) fail("BUILD on something that is not an object");
          if (!std::holds_alternative<PickleDict>(state->v)) fail("BUILD with a state that is not a dict");
          for (const auto& [k, v] : std::get<PickleDict>(state->v)) {
            std::string name = as_text(k, "an attribute's name");
            place(*obj, k);
            place(*obj, v);
            changeable(obj);
            std::get<PickleObject>(obj->v).attrs.emplace_back(std::move(name), v);
          }
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
          fail(std::string("opcode ") + hex + " is not one a rendezvous state uses");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw errors::protocol_error(what + " (the opcode at byte " + std::to_string(op_at_) + ")");
  }

  // Reading the input.
  uint8_t byte() {
    if (pos_ >= in_.size()) fail("truncated");
    return in_[pos_++];
  }
  std::span<const uint8_t> bytes(size_t n) {
    if (n > in_.size() - pos_) fail("truncated: " + std::to_string(n) + " bytes wanted");
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
  std::string line() {
    std::string out;
    for (uint8_t c; (c = byte()) != '\n';) out.push_back(static_cast<char>(c));
    return out;
  }

  // The budget: every value produced, memo references included.
  void charge(size_t n) {
    if (n > budget_ - spent_) {
      fail("decodes to more than " + std::to_string(budget_) + " bytes (the decoded-size limit for a pickle of " +
           std::to_string(in_.size()) + " bytes)");
    }
    spent_ += n;
  }
  template <typename T>
  Ref fresh(T x, size_t payload = 0) {
    charge(kValueBytes + payload);
    auto r = std::make_shared<PickleValue>();
    r->v = std::move(x);
    r->size = kValueBytes + payload;
    return r;
  }
  template <typename T>
  Ref container(T x) {
    Ref r = fresh(std::move(x));
    r->depth = 1;
    return r;
  }
  Ref text(size_t n) {
    const auto b = bytes(n);
    return fresh(std::string(b.begin(), b.end()), n);
  }
  Ref blob(size_t n) {
    const auto b = bytes(n);
    return fresh(std::vector<uint8_t>(b.begin(), b.end()), n);
  }

  // Containers. A value put into a container is final from then on; the container's depth and
  // size take in the value's, within the limits.
  void place(PickleValue& into, const Ref& item) {
    item->placed = true;
    if (item->depth + 1 > kMaxPickleDepth) fail("nested deeper than " + std::to_string(kMaxPickleDepth) + " containers");
    into.depth = std::max(into.depth, item->depth + 1);
    if (item->size + kSlotBytes > budget_ - into.size) fail("a container larger than the decoded-size limit");
    into.size += item->size + kSlotBytes;
  }
  const Ref& changeable(const Ref& r) const {
    if (r->placed) fail("a container changed after it was put into another");
    return r;
  }
  // Each checks that the container may change after placing the item, so that a container put
  // into itself is refused.
  void add_item(const Ref& into, Ref item) {
    place(*into, item);
    changeable(into);
    std::get<PickleItems>(into->v).push_back(std::move(item));
  }
  void add_pair(const Ref& d, Ref key, Ref value) {
    if (!std::holds_alternative<PickleDict>(d->v)) fail("items set on something that is not a dict");
    place(*d, key);
    place(*d, value);
    changeable(d);
    std::get<PickleDict>(d->v).emplace_back(std::move(key), std::move(value));
  }
  void tuple(size_t n) {
    PickleItems items(n);
    for (size_t i = n; i-- > 0;) items[i] = pop();
    Ref t = container(PickleItems{});
    for (Ref& item : items) add_item(t, std::move(item));
    push(std::move(t));
  }

  // The stack and the memo.
  void push(Ref r) {
    if (stack_.size() >= kMaxPickleStack) fail("a stack deeper than " + std::to_string(kMaxPickleStack) + " values");
    stack_.push_back(std::move(r));
  }
  Ref pop() {
    if (stack_.empty() || std::holds_alternative<PickleMark>(stack_.back()->v)) fail("stack underflow");
    Ref r = std::move(stack_.back());
    stack_.pop_back();
    return r;
  }
  Ref top() const {
    if (stack_.empty()) fail("stack underflow");
    return stack_.back();
  }
  PickleItems pop_to_mark() {
    PickleItems out;
    for (;;) {
      if (stack_.empty()) fail("no MARK before here");
      Ref r = std::move(stack_.back());
      stack_.pop_back();
      if (std::holds_alternative<PickleMark>(r->v)) break;
      out.push_back(std::move(r));
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  void put(size_t index) {
    if (index > memo_.size()) {
      fail("memo index " + std::to_string(index) + " skips past the " + std::to_string(memo_.size()) + " stored");
    }
    Ref value = top();
    if (index == memo_.size()) {
      charge(kSlotBytes);
      memo_.push_back(std::move(value));
    } else {
      memo_[index] = std::move(value);
    }
  }
  void get(size_t index) {
    if (index >= memo_.size()) fail("memo index " + std::to_string(index) + " was never stored");
    charge(kSlotBytes + memo_[index]->size);  // read back: counted again, as its reader would copy it
    push(memo_[index]);
  }

  // Reading values as what an opcode needs.
  const Ref& list(const Ref& r) const {
    if (!std::holds_alternative<PickleItems>(r->v) || r->is_set) fail("APPEND to something that is not a list");
    return r;
  }
  const PickleItems& items_of(const Ref& r) const {
    if (!std::holds_alternative<PickleItems>(r->v)) fail("arguments that are not a tuple");
    return std::get<PickleItems>(r->v);
  }
  std::string as_text(const Ref& r, const char* what) const {
    if (!std::holds_alternative<std::string>(r->v)) fail(std::string(what) + " that is not a string");
    return std::get<std::string>(r->v);
  }
  const PickleGlobal& as_global(const Ref& r) const {
    if (!std::holds_alternative<PickleGlobal>(r->v)) fail("a call of something that is not a class");
    return std::get<PickleGlobal>(r->v);
  }
  // Only the allowed classes and datetime.datetime; nothing else is ever named, let alone called.
  Ref global(std::string module, std::string name) {
    const bool listed = std::any_of(allowed_.begin(), allowed_.end(),
                                    [&](const PickleAllowedGlobal& g) { return g.module == module && g.name == name; });
    if (!listed && !(module == "datetime" && name == "datetime")) {
      fail("refuses the global " + printable(module + "." + name) + " (only a rendezvous state's classes are read)");
    }
    const size_t n = module.size() + name.size();
    return fresh(PickleGlobal{std::move(module), std::move(name)}, n);
  }
  // datetime's pickled form: year (2 bytes, big-endian), month, day, hour, minute, second,
  // microsecond (3 bytes, big-endian).
  PickleDatetime datetime(const std::vector<uint8_t>& b) const {
    if (b.size() != 10) fail("a datetime of " + std::to_string(b.size()) + " bytes, not 10");
    const int year = b[0] << 8 | b[1];
    const unsigned micro = unsigned{b[7]} << 16 | unsigned{b[8]} << 8 | b[9];
    // Years whose nanoseconds fit in 64 bits (1678-2261): PyTorch's are the time it wrote them.
    if (year < 1678 || year > 2261 || b[2] < 1 || b[2] > 12 || b[3] < 1 || b[3] > 31 || b[4] > 23 || b[5] > 59 || b[6] > 59 || micro > 999'999) {
      fail("a datetime out of range");
    }
    return {unix_ns(year, b[2], b[3], b[4], b[5], b[6], micro)};
  }

  std::span<const uint8_t> in_;
  std::span<const PickleAllowedGlobal> allowed_;
  size_t pos_ = 0;
  size_t op_at_ = 0;  // where the opcode being read began, for messages
  const size_t budget_;
  size_t spent_ = 0;
  std::vector<Ref> stack_;
  std::vector<Ref> memo_;
};

}  // namespace

size_t decoded_budget(size_t input_bytes) {
  if (input_bytes >= (kMaxPickleDecodedBytes - kPickleDecodedFloor) / kPickleBytesPerInputByte) return kMaxPickleDecodedBytes;
  return input_bytes * kPickleBytesPerInputByte + kPickleDecodedFloor;
}

PickleRef unpickle(std::span<const uint8_t> in, std::span<const PickleAllowedGlobal> allowed, size_t* decoded_bytes) {
  Unpickler u(in, allowed);
  PickleRef root = u.run();
  if (decoded_bytes != nullptr) *decoded_bytes = u.spent();
  return root;
}

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

}  // namespace dagsim::scenarios
