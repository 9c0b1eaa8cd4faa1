// scenarios/workloads/rendezvous/store_record_fuzz.cc: the libFuzzer target for a store's record
// as `dagsim judge` reads it (store_record_reader.h: lines, keys, values whole or summarised, and
// the states under the state key through pytorch_state.h), built and run by scripts/fuzz.sh
// (target "store_record"). Any client of the store chose most of a record, and the file itself
// may be anything. It promises to report (abort, so libFuzzer saves the input) any of:
//  - reading throwing anything but Error(invalid_records) (the record) or Error(protocol_error)
//    (a state that does not decode), or crashing, leaking, or tripping ASan, UBSan or an assert,
//    on any bytes;
//  - a message holding a control character (every name a record chose goes through printable());
//  - a line read past the header's bounds: nested deeper than kMaxStoreRecordDepth, or not an
//    object; line numbers that do not rise;
//  - a whole value whose hex does not write back as itself, or a summary whose digest is not 64
//    hex digits.
// Input: the record's text (store.jsonl). Lines whose key is the state key of run "job"
// ("torch.rendezvous.job", with or without PyTorch's "/") have their whole values decoded as
// states.
#include <cstdint>
#include <sstream>
#include <string>

#include "core/base/error.h"
#include "net/crypto.h"
#include "net/fuzz/fuzz_util.h"
#include "scenarios/workloads/rendezvous/pytorch_state.h"
#include "scenarios/workloads/rendezvous/store_record_reader.h"

namespace {

using namespace dagsim;
using namespace dagsim::scenarios;

void check_message(const Error& e) {
  if (e.code() != ErrorCode::invalid_records && e.code() != ErrorCode::protocol_error) {
    net::fuzz::fail("threw another error than invalid_records or protocol_error", e.what());
  }
  for (const char c : e.detail()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) net::fuzz::fail("a control character in a message", e.what());
  }
}

size_t depth_of(const nlohmann::json& j) {
  size_t deepest = 0;
  if (j.is_structured()) {
    for (const nlohmann::json& x : j) deepest = std::max(deepest, depth_of(x));
    return deepest + 1;
  }
  return 0;
}

void check_value(const nlohmann::json& v, const RecordedValue& r) {
  if (r.bytes) {
    DAGSIM_FUZZ_CHECK(v.is_string() && net::hex_of(*r.bytes) == v.get<std::string>());
    DAGSIM_FUZZ_CHECK(r.size == r.bytes->size());
  } else {
    DAGSIM_FUZZ_CHECK(r.sha256.size() == 64);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  StoreRecordReader reader(in, "fuzz/store.jsonl");
  size_t last_line = 0;
  try {
    while (std::optional<nlohmann::json> line = reader.next()) {
      DAGSIM_FUZZ_CHECK(line->is_object());
      DAGSIM_FUZZ_CHECK(depth_of(*line) <= kMaxStoreRecordDepth);
      DAGSIM_FUZZ_CHECK(reader.line() > last_line);
      last_line = reader.line();
      std::optional<std::string> key;
      if (line->contains("key")) key = read_key(line->at("key"), reader.at("key"));
      const bool state = key && (*key == "torch.rendezvous.job" || *key == "/torch.rendezvous.job");
      for (const char* field : {"value", "expected", "desired"}) {
        if (!line->contains(field) || line->at(field).is_null()) continue;
        const RecordedValue v = read_value(line->at(field), reader.at(field));
        check_value(line->at(field), v);
        if (!state || !v.bytes) continue;
        try {
          (void)decode_stored_state(*v.bytes, 1'700'000'000'000'000'000);
        } catch (const Error& e) {
          check_message(e);
        }
      }
    }
  } catch (const Error& e) {
    check_message(e);
  }
  return 0;
}
