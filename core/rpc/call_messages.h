// The payloads of the plain RPC messages: call (a registered function's name, its attributes and
// tensors), ret (the result tensors) and exception (an error code, the failing node, the text).
// Decoding bounds every length and names the field that is wrong (protocol_error).
#pragma once

#include <string>

#include "core/base/error.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/message.h"

namespace dagsim::rpc {

inline constexpr size_t kMaxFunctionName = 256;
inline constexpr size_t kMaxAttributeName = 64;
inline constexpr size_t kMaxAttributes = 64;
inline constexpr size_t kMaxErrorText = 64 * 1024;

struct Call {
  std::string function;
  CallArgs args;
};

Message make_call(uint64_t request_id, const std::string& function, const CallArgs& args);
Call read_call(const Message& message);

Message make_ret(uint64_t request_id, std::vector<Tensor> results);

// remote_call: a call whose result the callee keeps under `rref_id`.
Message make_remote_call(uint64_t request_id, uint64_t rref_id, const std::string& function, const CallArgs& args);
std::pair<uint64_t, Call> read_remote_call(const Message& message);
// A request whose whole payload is one id: an RRef (rref_fetch_call, rref_user_delete) or an
// autograd context (cleanup_autograd_context_req). `field` names it in errors.
Message make_id_request(MessageType type, uint64_t request_id, uint64_t id);
uint64_t read_id_request(const Message& message, const char* field);
// A reply of `type` carrying `tensors` (remote_ret, rref_fetch_ret, rref_ack).
Message make_reply(MessageType type, uint64_t request_id, std::vector<Tensor> tensors = {});

// An exception reply. The text reads as PyTorch's: "Error on Node N: <what went wrong>".
Message make_exception(uint64_t request_id, WorkerId node, const Error& error);
// The error an exception reply carries, with its original code.
Error read_exception(const Message& message);

}  // namespace dagsim::rpc
