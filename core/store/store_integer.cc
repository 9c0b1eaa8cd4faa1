#include "core/store/store_integer.h"

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::store {

namespace {

// C's isspace in the "C" locale, which std::stoll uses.
bool c_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string shown(std::span<const uint8_t> value) {
  return printable(std::string(reinterpret_cast<const char*>(value.data()), value.size()), 40);
}

}  // namespace

int64_t stored_integer(const std::string& key, std::span<const uint8_t> value) {
  size_t i = 0;
  while (i < value.size() && c_space(value[i])) ++i;
  bool negative = false;
  if (i < value.size() && (value[i] == '+' || value[i] == '-')) negative = value[i++] == '-';
  const size_t digits = i;
  // Accumulated as a magnitude in uint64, so INT64_MIN's, one past INT64_MAX, fits.
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t magnitude = 0;
  for (; i < value.size() && value[i] >= '0' && value[i] <= '9'; ++i) {
    const uint64_t digit = value[i] - '0';
    if (magnitude > (limit - digit) / 10) {
      throw errors::invalid_argument("store add: key " + printable(key, 80) + " holds " + shown(value) +
                                     ", an integer outside int64");
    }
    magnitude = magnitude * 10 + digit;
  }
  if (i == digits) {
    throw errors::invalid_argument("store add: key " + printable(key, 80) + " does not hold an integer (it holds " +
                                   shown(value) + ")");
  }
  return negative ? static_cast<int64_t>(uint64_t{0} - magnitude) : static_cast<int64_t>(magnitude);
}

int64_t wrapping_add(int64_t before, int64_t delta) {
  return static_cast<int64_t>(static_cast<uint64_t>(before) + static_cast<uint64_t>(delta));
}

}  // namespace dagsim::store
