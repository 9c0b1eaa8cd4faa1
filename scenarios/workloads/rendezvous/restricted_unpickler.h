// A restricted unpickler: the opcodes of pickle protocols 2-5 that a PyTorch rendezvous state
// uses, read into plain values (pytorch_state.h reads those values as the state). It is the one
// pickle reader of `dagsim judge`, which reads pickles any client of a store may have written, so
// it trusts nothing in them.
//
// Promises:
//  - No code runs and nothing is imported: a global is only ever a name, and one outside `allowed`
//    is refused by name (escaped: printable()). REDUCE builds a datetime.datetime from its 10
//    bytes and nothing else; NEWOBJ makes an empty object of an allowed class.
//  - Bounded by its input, whatever the input holds (each limit refused by name):
//    - the stack holds at most kMaxPickleStack values;
//    - values nest at most kMaxPickleDepth containers deep (a rendezvous state's nest 3), so
//      neither building nor freeing them recurses deeper than that;
//    - a memo index is at most the memo's size (a pickler numbers them in order), so the memo
//      grows by one entry per opcode at most;
//    - a budget of decoded bytes: every value produced counts its decoded size, a value read
//      back from the memo again (all of it, as its reader would copy it), a memo entry its slot,
//      and a container the sizes of its items; the total stays within decoded_budget(input), a
//      small multiple of the input, so a small pickle cannot make its reader build much more.
//  - A container cannot change after it was put into another (a pickler fills each before it is
//    used), so no value contains itself, and a value's depth and size are final once counted.
//  - Anything else wrong (a truncation, an unknown opcode, a stack underflow, a value of the wrong
//    kind) throws Error(protocol_error) naming it and the offset of its opcode; never a
//    crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace dagsim::scenarios {

inline constexpr size_t kMaxPickleStack = 4096;
inline constexpr size_t kMaxPickleDepth = 32;
// The decoded-size budget: kPickleBytesPerInputByte for each byte of the pickle plus a floor,
// never past kMaxPickleDecodedBytes. Sizes are what the values take in memory (a value's header
// is about 100 bytes), so a PyTorch state decodes to about 35 times its pickle's size (each node
// descriptor counted again where the memo refers to it; pytorch_state_test.cc measures a state of
// 1,000 nodes): 128 leaves room for any real state and still bounds what a hostile pickle can ask.
inline constexpr size_t kPickleBytesPerInputByte = 128;
inline constexpr size_t kPickleDecodedFloor = size_t{1} << 20;
inline constexpr size_t kMaxPickleDecodedBytes = size_t{1} << 30;
size_t decoded_budget(size_t input_bytes);

struct PickleValue;
using PickleRef = std::shared_ptr<PickleValue>;

struct PickleGlobal {
  std::string module, name;
};
struct PickleObject {
  std::string cls;  // an allowed global's name
  std::vector<std::pair<std::string, PickleRef>> attrs;
};
struct PickleDatetime {
  int64_t unix_ns = 0;  // naive, read as UTC
};
struct PickleMark {};
using PickleItems = std::vector<PickleRef>;                     // a tuple's, list's or set's items
using PickleDict = std::vector<std::pair<PickleRef, PickleRef>>;  // in the pickle's order

struct PickleValue {
  std::variant<std::monostate, bool, int64_t, std::string, std::vector<uint8_t>, PickleItems, PickleDict, PickleGlobal,
               PickleObject, PickleDatetime, PickleMark>
      v;
  bool is_set = false;  // PickleItems holds a set's (and a list's) items too
  bool placed = false;  // inside another container: it never changes again
  uint32_t depth = 0;   // containers within it, itself included (0 for a scalar)
  size_t size = 0;      // its decoded size, everything inside it included
};

struct PickleAllowedGlobal {
  std::string_view module, name;
};

// The value pickle.loads(`in`) would return, with only the globals in `allowed` (and
// datetime.datetime, always) named. Throws Error(protocol_error) as promised above.
// `decoded_bytes`, when given, is set to the budget the pickle used.
PickleRef unpickle(std::span<const uint8_t> in, std::span<const PickleAllowedGlobal> allowed,
                   size_t* decoded_bytes = nullptr);

// Nanoseconds since the Unix epoch of a civil UTC time (proleptic Gregorian).
int64_t unix_ns(int year, unsigned month, unsigned day, unsigned hour, unsigned minute, unsigned second,
                unsigned microsecond);

}  // namespace dagsim::scenarios
