// The file format of FileStore (file_store.h): the table a store file holds, decoded and encoded.
// Pure functions, no I/O; the fuzz target net/fuzz/file_store_fuzz.cc drives the decoder.
//
// A store file is dagsim's own format: "DGFS0001", the last version given (u64), the key count
// (u64), then per key its version (u64), key length (u32), value length (u64), key, value (all
// little-endian). Any process on the host (or the shared filesystem) that can write the file can
// put anything in it: the store has no authentication, so the decoder trusts nothing.
//
// What it promises:
//  - Bounded: a file of at most kMaxFileBytes, keys of at most kMaxKeyBytes, values of at most
//    kMaxValueBytes, at most kMaxKeys keys. Every length and count is checked against these and
//    against the bytes left before anything is allocated for it, so decoding costs memory in
//    proportion to the (bounded) file, never to what its numbers claim.
//  - A decoded table is consistent: every key once, every version from 1 to the last version.
//  - Versions never wrap: a change when the last version is 2^64-1 is refused (the next would be
//    0, which means "absent", and versions must rise).
//  - Errors name the file: protocol_error "file store PATH: WHAT (at byte N)" for a file that is
//    not this format or breaks a bound; invalid_argument "file store PATH: ..." for a change that
//    would break one. PATH and keys are printable() (escaped, cut): the file's author chooses keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/store/store.h"

namespace dagsim::net {

inline constexpr uint64_t kFileStoreMaxKeyBytes = uint64_t{16} << 20;
inline constexpr uint64_t kFileStoreMaxValueBytes = uint64_t{256} << 20;
// Room for two values at their limit and the rest; every call reads the file whole.
inline constexpr uint64_t kFileStoreMaxFileBytes = uint64_t{512} << 20;
// A map entry costs about 100 bytes beyond its key and value: 100 MiB at most for the bookkeeping.
inline constexpr uint64_t kFileStoreMaxKeys = uint64_t{1} << 20;

struct FileStoreTable {
  uint64_t last_version = 0;
  std::map<std::string, store::Versioned> keys;

  // Gives `key` `value` at the next version. Throws protocol_error naming `path` when the last
  // version is 2^64-1, invalid_argument when the key, the value or the key count would pass its
  // bound. The table is unchanged when it throws.
  void put(const std::string& key, store::Bytes value, std::string_view path);
};

// The table `bytes` (a store file's whole content) holds; empty bytes are a new, empty store.
// Throws protocol_error naming `path`.
FileStoreTable decode_file_store(std::string_view bytes, std::string_view path);

// The file's bytes for `table`. Throws invalid_argument naming `path` when they would pass
// kFileStoreMaxFileBytes (so no store ever writes a file it could not read back).
std::string encode_file_store(const FileStoreTable& table, std::string_view path);

// "file store PATH", PATH printable: how every message names the file.
std::string file_store_name(std::string_view path);

}  // namespace dagsim::net
