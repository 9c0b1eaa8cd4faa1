// The payloads of the plain RPC messages: call (a registered function's name and its typed
// arguments; its tensors travel beside the payload), remote_call (a call whose result the callee
// keeps under an RRef id), the RRef requests (one id), and exception (an error code, the failing
// node, the text). Each payload is a struct with one layout description (wire.h), so encoding and
// decoding cannot disagree; decoding bounds every length and names the field that is wrong
// (protocol_error).
#pragma once

#include <string>

#include "core/base/error.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/message.h"
#include "core/rpc/wire.h"

namespace dagsim::rpc {

inline constexpr size_t kMaxFunctionName = 256;
inline constexpr size_t kMaxAttributeName = 64;
inline constexpr size_t kMaxAttributes = 64;
inline constexpr size_t kMaxStringArgument = size_t{1} << 20;
inline constexpr size_t kMaxBytesArgument = size_t{64} << 20;
inline constexpr size_t kMaxErrorText = 64 * 1024;

struct Call {
  static constexpr const char* kName = "call";
  std::string function;
  CallArgs args;  // its tensors travel in the message, beside the payload

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.str("call.function", m.function, kMaxFunctionName);
    io.dict("call.attributes", m.args.attributes, kMaxAttributes, kMaxAttributeName,
            [&](auto& v) { io.num("call.attribute", v); });
    io.list("call.rrefs", m.args.rrefs, kMaxAttributes, [&](auto& v) { io.num("call.rref_id", v); });
    io.dict("call.ints", m.args.ints, kMaxAttributes, kMaxAttributeName, [&](auto& v) { io.num("call.int", v); });
    io.dict("call.strings", m.args.strings, kMaxAttributes, kMaxAttributeName,
            [&](auto& v) { io.str("call.string", v, kMaxStringArgument); });
    io.dict("call.blobs", m.args.blobs, kMaxAttributes, kMaxAttributeName,
            [&](auto& v) { io.blob("call.blob", v, kMaxBytesArgument); });
  }
};

struct RemoteCall {
  static constexpr const char* kName = "remote_call";
  uint64_t rref_id = 0;
  Call call;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("remote_call.rref_id", m.rref_id);
    Call::fields(io, m.call);
  }
};

// rref_fetch_call and rref_user_delete: the RRef, by id.
struct RRefRequest {
  static constexpr const char* kName = "rref_request";
  uint64_t rref_id = 0;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("rref.rref_id", m.rref_id);
  }
};

struct ExceptionPayload {
  static constexpr const char* kName = "exception";
  uint32_t code = 0;
  uint16_t node = 0;
  std::string text;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("exception.code", m.code);
    io.num("exception.node", m.node);
    io.str("exception.text", m.text, kMaxErrorText);
  }
};

// A message of `type` with `payload` encoded (and no tensors).
template <WirePayload T>
Message make_message(MessageType type, uint64_t request_id, const T& payload) {
  DAGSIM_ASSERT(is_known_message_type(static_cast<uint16_t>(type)));
  Message m;
  m.type = type;
  m.request_id = request_id;
  m.payload = to_bytes(payload);
  return m;
}

Message make_call(uint64_t request_id, const std::string& function, const CallArgs& args);
Call read_call(const Message& message);

Message make_ret(uint64_t request_id, std::vector<Tensor> results);

// remote_call: a call whose result the callee keeps under `rref_id`.
Message make_remote_call(uint64_t request_id, uint64_t rref_id, const std::string& function, const CallArgs& args);
RemoteCall read_remote_call(const Message& message);
// rref_fetch_call or rref_user_delete.
Message make_rref_request(MessageType type, uint64_t request_id, uint64_t rref_id);
uint64_t read_rref_request(const Message& message);
// A reply of `type` carrying `tensors` (remote_ret, rref_fetch_ret, rref_ack).
Message make_reply(MessageType type, uint64_t request_id, std::vector<Tensor> tensors = {});

// An exception reply. The text reads as PyTorch's: "Error on Node N: <what went wrong>".
Message make_exception(uint64_t request_id, WorkerId node, const Error& error);
// The error an exception reply carries, with its original code.
Error read_exception(const Message& message);

}  // namespace dagsim::rpc
