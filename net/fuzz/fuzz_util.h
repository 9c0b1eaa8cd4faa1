// net/fuzz/fuzz_util.h: what the net/ libFuzzer targets (envelope_fuzz.cc, handshake_fuzz.cc)
// share. Promises: reading the fuzzer's input never fails (past its end every read gives zeros,
// so any byte string is a valid input), the chunk schedule is a pure function of the input (a
// crash replays from its artifact alone), and fail() stops the run in a way libFuzzer records as a
// crash (abort: a "deadly signal", with the input saved as an artifact).
//
// Inputs are read front to back in the order the targets document, so net/fuzz/make_corpus.py can
// write seeds that mean something (a valid hello, a sealed envelope) and mutations start there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "core/base/error.h"

namespace dagsim::net::fuzz {

// Prints what broke and aborts: libFuzzer saves the input that did it.
[[noreturn]] inline void fail(const char* what, const char* detail = "") {
  std::fprintf(stderr, "dagsim fuzz: property violated: %s%s%s\n", what, *detail ? ": " : "", detail);
  std::fflush(stderr);
  std::abort();
}

#define DAGSIM_FUZZ_CHECK(cond)                                          \
  do {                                                                   \
    if (!(cond)) ::dagsim::net::fuzz::fail(#cond " at " __FILE__);       \
  } while (0)

// DAGSIM_FUZZ_TRACE=1 in the environment makes a target say what one input did (replaying an
// artifact or checking that a seed reaches where it should); read once, silent otherwise.
inline bool tracing() {
  static const bool on = [] {
    const char* v = std::getenv("DAGSIM_FUZZ_TRACE");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return on;
}

// A bounded reader's refusal as its fuzz target requires it: Error(invalid_argument) whose detail
// starts with "NAME: " (the file it read) and is one printable line. Says what it refused when
// tracing.
inline void check_named_refusal(const dagsim::Error& e, std::string_view name) {
  if (e.code() != dagsim::ErrorCode::invalid_argument) fail("another error than invalid_argument", e.what());
  const std::string& d = e.detail();
  DAGSIM_FUZZ_CHECK(d.size() > name.size() + 1 && d.compare(0, name.size(), name) == 0 &&
                    d.compare(name.size(), 2, ": ") == 0);
  for (char c : d) DAGSIM_FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  if (tracing()) std::fprintf(stderr, "refused: %s\n", d.c_str());
}

// The deepest bracket ([ or {) of JSON text outside its strings, by a scan of its own: what a
// target holds a bounded JSON reader's nesting limit to, apart from the parser.
inline size_t bracket_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

// The fuzzer's input, read front to back; reads past the end give zeros (or fewer bytes).
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : rest_(data, size) {}

  uint8_t u8() { return static_cast<uint8_t>(little_endian(1)); }
  uint16_t u16() { return static_cast<uint16_t>(little_endian(2)); }
  uint32_t u32() { return static_cast<uint32_t>(little_endian(4)); }
  // Up to `n` bytes (fewer when the input ends first).
  std::span<const uint8_t> take(size_t n) {
    const std::span<const uint8_t> out = rest_.first(std::min(n, rest_.size()));
    rest_ = rest_.subspan(out.size());
    return out;
  }
  std::span<const uint8_t> rest() { return take(rest_.size()); }
  bool empty() const { return rest_.empty(); }

 private:
  uint64_t little_endian(size_t n) {
    uint64_t v = 0;
    const std::span<const uint8_t> b = take(n);
    for (size_t i = 0; i < b.size(); ++i) v |= uint64_t{b[i]} << (8 * i);
    return v;
  }
  std::span<const uint8_t> rest_;
};

// How many bytes each simulated socket read delivers, from one input byte: bits 0-2 pick the
// largest read (1 byte ... unbounded), bit 3 makes reads vary between 1 and that size, bits 4-7
// seed the variation. Small and odd sizes split headers, MACs and handshake messages at every
// offset; large ones deliver many envelopes per read and take the decoder's direct-read path.
class ChunkSchedule {
 public:
  explicit ChunkSchedule(uint8_t spec)
      : max_(kSizes[spec & 7]), vary_((spec & 8) != 0), state_(0x9e3779b9u ^ (uint32_t{spec} << 8)) {}

  // The size of the next read (at least 1).
  size_t next() { return vary_ ? 1 + draw() % max_ : max_; }
  // A pseudo-random number (xorshift32), for other choices driven by the same byte.
  uint32_t draw() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    return state_;
  }

 private:
  static constexpr size_t kSizes[8] = {1, 2, 3, 7, 16, 61, 4096, size_t{1} << 30};
  size_t max_;
  bool vary_;
  uint32_t state_;
};

}  // namespace dagsim::net::fuzz
