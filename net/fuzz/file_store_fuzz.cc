// net/fuzz/file_store_fuzz.cc: the libFuzzer target for FileStore's file format
// (net/file_store_format.h), built and run by scripts/fuzz.sh (target "file_store"). A store file
// is anyone's to write on its host, so the decoder trusts nothing. It promises to report (abort,
// so libFuzzer saves the input) any of:
//  - decode_file_store on any bytes throwing anything but protocol_error, or crashing, leaking,
//    or tripping ASan, UBSan or an assert;
//  - a message (of a refusal or a refused change) holding a control character: keys and the path
//    are escaped, whatever the file holds;
//  - a decoded table that breaks the header's promises: more keys than kFileStoreMaxKeys, a key
//    or value over its bound, a version outside 1..last_version;
//  - a table that does not survive its own encoding (encode, decode: the same keys, values and
//    versions), or that encodes past kFileStoreMaxFileBytes;
//  - a change (put of a new key, and of the first key) that does not give the next version, or
//    that wraps: with the last version at 2^64-1 it must be refused, the table unchanged.
// Input: the file's whole content (the committed seeds are store files, net/fuzz/corpus/file_store/).
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/base/error.h"
#include "net/file_store_format.h"
#include "net/fuzz/fuzz_util.h"

namespace {

using dagsim::net::FileStoreTable;
namespace fuzz = dagsim::net::fuzz;

// The path in every message: itself a string no terminal should act on, so escaping is checked.
constexpr std::string_view kPath = "/tmp/fuzz\x1b[2Jstore";

void check_printable(const dagsim::Error& e) {
  for (const char c : std::string(e.what())) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) fuzz::fail("a control character in a message", e.what());
  }
}

void check_table(const FileStoreTable& t) {
  DAGSIM_FUZZ_CHECK(t.keys.size() <= dagsim::net::kFileStoreMaxKeys);
  for (const auto& [key, v] : t.keys) {
    DAGSIM_FUZZ_CHECK(key.size() <= dagsim::net::kFileStoreMaxKeyBytes);
    DAGSIM_FUZZ_CHECK(v.value.size() <= dagsim::net::kFileStoreMaxValueBytes);
    DAGSIM_FUZZ_CHECK(v.version >= 1 && v.version <= t.last_version);
  }
}

void check_round_trip(const FileStoreTable& t) {
  const std::string bytes = dagsim::net::encode_file_store(t, kPath);
  DAGSIM_FUZZ_CHECK(bytes.size() <= dagsim::net::kFileStoreMaxFileBytes);
  const FileStoreTable back = dagsim::net::decode_file_store(bytes, kPath);
  DAGSIM_FUZZ_CHECK(back.last_version == t.last_version);
  DAGSIM_FUZZ_CHECK(back.keys.size() == t.keys.size());
  for (const auto& [key, v] : t.keys) {
    const auto it = back.keys.find(key);
    DAGSIM_FUZZ_CHECK(it != back.keys.end());
    DAGSIM_FUZZ_CHECK(it->second.value == v.value && it->second.version == v.version);
  }
}

// put(key) on a copy of `t`: the next version, or refused (the copy unchanged) exactly when the
// last version is at the top.
void check_put(const FileStoreTable& t, const std::string& key) {
  FileStoreTable changed = t;
  try {
    changed.put(key, dagsim::runtime::Bytes{'v'}, kPath);
  } catch (const dagsim::Error& e) {
    check_printable(e);
    if (e.code() == dagsim::ErrorCode::protocol_error) {
      DAGSIM_FUZZ_CHECK(t.last_version == std::numeric_limits<uint64_t>::max());
    } else if (e.code() != dagsim::ErrorCode::invalid_argument) {
      fuzz::fail("put threw other than protocol_error or invalid_argument", e.what());
    }
    DAGSIM_FUZZ_CHECK(changed.last_version == t.last_version && changed.keys.size() == t.keys.size());
    return;
  }
  DAGSIM_FUZZ_CHECK(t.last_version != std::numeric_limits<uint64_t>::max());
  DAGSIM_FUZZ_CHECK(changed.last_version == t.last_version + 1);
  DAGSIM_FUZZ_CHECK(changed.keys.at(key).version == changed.last_version);
  check_table(changed);
  check_round_trip(changed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  FileStoreTable t;
  try {
    t = dagsim::net::decode_file_store(bytes, kPath);
  } catch (const dagsim::Error& e) {
    if (e.code() != dagsim::ErrorCode::protocol_error) fuzz::fail("decode threw other than protocol_error", e.what());
    check_printable(e);
    if (fuzz::tracing()) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  if (fuzz::tracing()) std::fprintf(stderr, "decoded: %zu keys, last version %llu\n", t.keys.size(), static_cast<unsigned long long>(t.last_version));
  check_table(t);
  check_round_trip(t);
  check_put(t, "fuzz/new key");
  if (!t.keys.empty()) check_put(t, t.keys.begin()->first);
  return 0;
}
