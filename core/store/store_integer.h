// The integer rule of every store's add(), one definition for the built-in table and the etcd
// backend: PyTorch's TCPStore keeps a counter as decimal text, and its add (1.13's
// TCPStoreMasterDaemon::addHandler) reads the stored text with std::stoll, adds the delta in int64
// and stores the sum back as decimal text.
//
// What it promises, as Debian's python3-torch 1.13.1 answers (each case checked against its
// server, conformance/interop/tcpstore_diff.py):
//  - The text is read as C's strtoll reads it in base 10: leading white space (" \t\n\v\f\r"), an
//    optional sign, then decimal digits up to the first byte that is not one; the rest is ignored.
//    So "3abc" is 3, " 5", "+5" and "5\n" are 5, "0x10" is 0.
//  - Text with no digits where they must start ("abc", "", "- 5") does not hold an integer, and
//    digits past int64 ("99999999999999999999") are out of its range: both are errors
//    (invalid_argument, naming the key), where PyTorch's server closes the connection.
//  - The sum wraps at 2^63 in two's complement, as PyTorch's int64 sum does on every platform it
//    ships for: INT64_MAX + 1 is INT64_MIN. (In C++ that sum is undefined; here it is computed in
//    uint64, where it is defined.)
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dagsim::store {

// The integer `value` (the bytes held by `key`, named in errors) holds for add().
int64_t stored_integer(const std::string& key, std::span<const uint8_t> value);

// before + delta, wrapping at 2^63.
int64_t wrapping_add(int64_t before, int64_t delta);

}  // namespace dagsim::store
