// The payloads of the plain RPC messages: call (a registered function's name and its typed
// arguments; its tensors travel beside the payload, its RRef arguments as forks), remote_call (a
// call whose result the callee keeps under an RRef id), the RRef requests (an RRef and one of its
// forks), and exception (an error code, the failing
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
  CallArgs args;  // its tensors travel in the message, beside the payload; args.rrefs as `forks`
  // One fork per RRef argument (RpcAgent::fork made them; the callee adopts them into handles).
  std::vector<RRefForkData> forks = {};

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.str("call.function", m.function, kMaxFunctionName);
    io.dict("call.attributes", m.args.attributes, kMaxAttributes, kMaxAttributeName,
            [&](auto& v) { io.num("call.attribute", v); });
    io.list("call.rrefs", m.forks, kMaxAttributes, [&](auto& f) {
      io.num("call.rref.owner", f.owner);
      io.num("call.rref.rref_id", f.rref_id);
      io.num("call.rref.fork_id", f.fork_id);
      io.num("call.rref.parent", f.parent);
    });
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

// rref_fetch_call, rref_user_delete, rref_fork_request and rref_child_accept: the RRef and the
// fork they are about (the fetching or deleted handle's, the fork to count or that was accepted).
struct RRefRequest {
  static constexpr const char* kName = "rref_request";
  uint64_t rref_id = 0;
  uint64_t fork_id = 0;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("rref.rref_id", m.rref_id);
    io.num("rref.fork_id", m.fork_id);
  }
};
inline bool is_rref_request(MessageType type) {
  return type == MessageType::rref_fetch_call || type == MessageType::rref_user_delete ||
         type == MessageType::rref_fork_request || type == MessageType::rref_child_accept;
}

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

// A call; `forks` are args.rrefs as forked for the callee (one each, in order).
Message make_call(uint64_t request_id, const std::string& function, const CallArgs& args,
                  std::vector<RRefForkData> forks = {});
Call read_call(const Message& message);

Message make_ret(uint64_t request_id, std::vector<Tensor> results);

// remote_call: a call whose result the callee keeps under `rref_id`.
Message make_remote_call(uint64_t request_id, uint64_t rref_id, const std::string& function, const CallArgs& args,
                         std::vector<RRefForkData> forks = {});
RemoteCall read_remote_call(const Message& message);
// One of the RRef requests (is_rref_request).
Message make_rref_request(MessageType type, uint64_t request_id, uint64_t rref_id, uint64_t fork_id);
RRefRequest read_rref_request(const Message& message);
// A reply of `type` carrying `tensors` (remote_ret, rref_fetch_ret, rref_ack).
Message make_reply(MessageType type, uint64_t request_id, std::vector<Tensor> tensors = {});

// An exception reply. The text reads as PyTorch's: "Error on Node N: <what went wrong>".
Message make_exception(uint64_t request_id, WorkerId node, const Error& error);
// The error an exception reply carries, with its original code.
Error read_exception(const Message& message);

}  // namespace dagsim::rpc
