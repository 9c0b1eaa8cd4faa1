// printable(), quote() and key_name() (printable.h).
#include "core/base/printable.h"

#include <algorithm>
#include <cstdio>

namespace dagsim {
namespace {

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool is_bare_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Escapes one byte into `out`. Bytes >= 0x80 pass through: UTF-8 text stays readable, and a
// terminal does not act on a lone continuation byte.
void escape(unsigned char c, std::string& out) {
  switch (c) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\n': out += "\\n"; return;
    case '\t': out += "\\t"; return;
    case '\r': out += "\\r"; return;
    default: break;
  }
  if (is_control(c)) {
    char buffer[8];
    std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
    out += buffer;
    return;
  }
  out += static_cast<char>(c);
}

// A cut must not split a UTF-8 sequence: back up to the start of the character at `n`.
size_t cut_point(std::string_view s, size_t n) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return n;
}

}  // namespace

std::string quote(std::string_view s, size_t max) {
  const bool cut = s.size() > max;
  const std::string_view shown = cut ? s.substr(0, cut_point(s, max)) : s;
  std::string out = "\"";
  for (char c : shown) escape(static_cast<unsigned char>(c), out);
  out += cut ? "...\" (" + std::to_string(s.size()) + " bytes)" : "\"";
  return out;
}

std::string printable(std::string_view s, size_t max) {
  const bool plain = s.size() <= max && !s.empty() && std::none_of(s.begin(), s.end(), [](char c) {
                       return is_control(static_cast<unsigned char>(c));
                     });
  return plain ? std::string(s) : quote(s, max);
}

std::string key_name(std::string_view key, size_t max) {
  const bool bare = !key.empty() && key.size() <= max && std::all_of(key.begin(), key.end(), is_bare_key_char);
  return bare ? std::string(key) : quote(key, max);
}

std::string counted(uint64_t n, std::string_view noun, std::string_view plural) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) return out.append(noun);
  if (!plural.empty()) return out.append(plural);
  return out.append(noun).append("s");
}

}  // namespace dagsim
