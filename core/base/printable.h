// printable(): the one way a user-supplied string (a name, a key, a value, a path, a command-line
// argument) enters an error message. The message stays one line and harmless on a terminal
// whatever the input holds: control characters and escape sequences are escaped, and a long
// string is cut to a prefix with its full length, so a 1 MB key never floods the screen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dagsim {

// Characters kept before the ellipsis when a string is cut.
inline constexpr size_t kPrintableMax = 80;
// Paths are cut only where no real path reaches (PATH_MAX).
inline constexpr size_t kPathMax = 4096;

// `s` in double quotes, TOML-escaped (\", \\, \n, \t, \uXXXX for other control characters and
// DEL), cut after `max` characters of the input with `..." (N bytes)`: "work\ner1".
std::string quote(std::string_view s, size_t max = kPrintableMax);

// `s` as is when it is short and has nothing to escape; otherwise quote(s, max). For paths and
// arguments, which usually print best bare.
std::string printable(std::string_view s, size_t max = kPrintableMax);

// A TOML key as a key path element: bare when it is a bare key ([A-Za-z0-9_-]+), else quoted,
// so a key such as "a: b" or "a.b" reads unambiguously in "FILE:LINE: KEY: problem".
std::string key_name(std::string_view key, size_t max = kPrintableMax);

// "1 restart", "0 restarts", "3 restarts": a count and its noun, plural unless the count is 1.
// `plural` for nouns whose plural is not noun + "s" ("1 process", "2 processes").
std::string counted(uint64_t n, std::string_view noun, std::string_view plural = {});

}  // namespace dagsim
