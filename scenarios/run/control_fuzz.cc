// scenarios/run/control_fuzz.cc: the libFuzzer target for the control protocol's one codec
// (control_messages.h), built and run by scripts/fuzz.sh (target "control"). The input is the text
// of one control message as it would arrive on a link, in either direction: every input goes
// through both decoders, decode_command (what a node reads from the launcher) and decode_event
// (what the launcher reads from a node), and the seed corpus (net/fuzz/corpus/control/) holds one
// message of every command and every event kind. The link's framing and authentication below the
// message are not this target's (net/fuzz/envelope_fuzz.cc, handshake_fuzz.cc, and TLS's own). It
// promises to report (abort, so libFuzzer saves the input) any of:
//  - parse_message, decode_command or decode_event throwing anything but Error(protocol_error), or
//    crashing, leaking, or tripping ASan, UBSan or an assert, on any bytes (deep nesting included);
//  - a message that decodes whose encoding does not decode back to the same message, or whose
//    encoding's text does not parse.
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "scenarios/run/control_messages.h"

namespace dagsim::scenarios::control {
namespace {

template <typename Decode>
void round_trip(const nlohmann::json& message, Decode decode) {
  std::optional<decltype(decode(message))> decoded;
  try {
    decoded = decode(message);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::protocol_error) net::fuzz::fail("decoding threw another error than protocol_error", e.what());
    return;
  }
  // What decoded once must encode to text that parses and decodes to the same message: any
  // error from here on is a bug of the codec.
  try {
    const nlohmann::json again = parse_message(encode(*decoded).dump());
    DAGSIM_FUZZ_CHECK(decode(again) == *decoded);
  } catch (const Error& e) {
    net::fuzz::fail("a decoded message did not survive its own encoding", e.what());
  }
}

}  // namespace
}  // namespace dagsim::scenarios::control

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dagsim::scenarios::control;
  nlohmann::json message;
  try {
    message = parse_message(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const dagsim::Error& e) {
    if (e.code() != dagsim::ErrorCode::protocol_error) dagsim::net::fuzz::fail("parsing threw another error", e.what());
    return 0;
  }
  round_trip(message, [](const nlohmann::json& m) { return decode_command(m); });
  round_trip(message, [](const nlohmann::json& m) { return decode_event(m); });
  return 0;
}
