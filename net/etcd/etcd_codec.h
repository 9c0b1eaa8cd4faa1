// The JSON of etcd's v3 gateway, as EtcdStore speaks it: keys and values travel as base64, 64-bit
// numbers as decimal strings (proto3's JSON mapping; a field at its default, 0 or false or empty,
// is left out), and a key's range end is the prefix's successor. Pure functions, no I/O; every
// reader refuses malformed input with protocol_error instead of guessing. Reading replies:
// etcd_reply.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/runtime/transport.h"
#include "net/etcd/etcd_http.h"

namespace dagsim::net::etcd {

using runtime::Bytes;

std::string base64_encode(std::string_view bytes);
std::string base64_encode(const Bytes& bytes);
// Throws protocol_error on anything that is not canonical padded base64.
std::string base64_decode(std::string_view text);
Bytes base64_decode_bytes(std::string_view text);

// The smallest key greater than every key that starts with `prefix` (etcd's range_end for a
// prefix); "\0" (every key) for an empty prefix or one of only 0xff bytes.
std::string prefix_end(std::string prefix);

// Request bodies. `key` is the full etcd key (prefix included).
Json range_request(const std::string& key, bool count_only = false);
Json put_request(const std::string& key, const Bytes& value);
// A Compare of the key's mod revision (0: the key is absent) or of its value, for equality.
Json mod_revision_equals(const std::string& key, uint64_t mod_revision);
Json value_equals(const std::string& key, const Bytes& value);

}  // namespace dagsim::net::etcd
