// net/fuzz/store_restore_fuzz.cc: the libFuzzer target for `dagsim store --restore FILE`
// (store_restore.h): a store's earlier record replayed into a table before it listens. The record
// is a file in the run's folder, which the job's own processes may write, so it is untrusted. It
// promises to report (abort, so libFuzzer saves the input) any of:
//  - the replay throwing anything but Error(invalid_argument), or crashing, leaking, or tripping
//    ASan, UBSan or an assert, on any bytes;
//  - a message holding a control character (a record's names go through printable()).
// Input: the record's text, written to a temporary file and restored into an empty table.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/base/error.h"
#include "core/store/key_value_table.h"
#include "net/fuzz/fuzz_util.h"
#include "net/tcpstore/store_restore.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dagsim;
  static const std::string path = "/tmp/dagsim-store-restore-fuzz-" + std::to_string(::getpid()) + ".jsonl";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0) (void)std::fwrite(data, 1, size, f);
  std::fclose(f);
  store::KeyValueTable table;
  try {
    (void)net::tcpstore::restore_store_records({path}, table);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) net::fuzz::fail("threw another error than invalid_argument", e.what());
    for (const char c : e.detail()) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) net::fuzz::fail("a control character in a message", e.what());
    }
  }
  std::remove(path.c_str());
  return 0;
}
