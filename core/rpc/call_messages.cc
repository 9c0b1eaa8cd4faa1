#include "core/rpc/call_messages.h"

namespace dagsim::rpc {

Message make_call(uint64_t request_id, const std::string& function, const CallArgs& args,
                  std::vector<RRefForkData> forks) {
  DAGSIM_ASSERT_MSG(!function.empty(), "a call names a function");
  DAGSIM_ASSERT_MSG(forks.size() == args.rrefs.size(), "every RRef argument travels as a fork");
  Message m = make_message(MessageType::call, request_id, Call{function, args, std::move(forks)});
  m.tensors = args.tensors;
  return m;
}

Call read_call(const Message& message) {
  DAGSIM_ASSERT(message.type == MessageType::call);
  Call call = from_bytes<Call>(message.payload);
  call.args.tensors = message.tensors;
  return call;
}

Message make_ret(uint64_t request_id, std::vector<Tensor> results) {
  return make_reply(MessageType::ret, request_id, std::move(results));
}

Message make_remote_call(uint64_t request_id, uint64_t rref_id, const std::string& function, const CallArgs& args,
                         std::vector<RRefForkData> forks) {
  DAGSIM_ASSERT_MSG(rref_id != 0, "a remote call names the RRef that keeps its result");
  DAGSIM_ASSERT_MSG(forks.size() == args.rrefs.size(), "every RRef argument travels as a fork");
  Message m = make_message(MessageType::remote_call, request_id, RemoteCall{rref_id, Call{function, args, std::move(forks)}});
  m.tensors = args.tensors;
  return m;
}

RemoteCall read_remote_call(const Message& message) {
  DAGSIM_ASSERT(message.type == MessageType::remote_call);
  RemoteCall remote = from_bytes<RemoteCall>(message.payload);
  remote.call.args.tensors = message.tensors;
  return remote;
}

Message make_rref_request(MessageType type, uint64_t request_id, uint64_t rref_id, uint64_t fork_id) {
  DAGSIM_ASSERT(is_rref_request(type) && rref_id != 0 && fork_id != 0);
  return make_message(type, request_id, RRefRequest{rref_id, fork_id});
}

RRefRequest read_rref_request(const Message& message) {
  DAGSIM_ASSERT(is_rref_request(message.type));
  return from_bytes<RRefRequest>(message.payload);
}

Message make_reply(MessageType type, uint64_t request_id, std::vector<Tensor> tensors) {
  DAGSIM_ASSERT_MSG(!is_request(type) && type != MessageType::exception, "make_reply makes plain responses");
  Message m;
  m.type = type;
  m.request_id = request_id;
  m.tensors = std::move(tensors);
  return m;
}

Message make_exception(uint64_t request_id, WorkerId node, const Error& error) {
  ExceptionPayload payload{static_cast<uint32_t>(error.code()), node, error.detail()};
  // Nested remote errors already say where they came from; say it once.
  if (payload.text.rfind("Error on Node ", 0) != 0) payload.text = "Error on Node " + std::to_string(node) + ": " + payload.text;
  if (payload.text.size() > kMaxErrorText) payload.text.resize(kMaxErrorText);
  DAGSIM_ASSERT(payload.text.rfind("Error on Node ", 0) == 0);  // PyTorch's text, always
  return make_message(MessageType::exception, request_id, payload);
}

Error read_exception(const Message& message) {
  DAGSIM_ASSERT(message.type == MessageType::exception);
  ExceptionPayload payload = from_bytes<ExceptionPayload>(message.payload);
  const std::optional<ErrorCode> known = error_code_from_int(static_cast<int>(payload.code));
  return Error(known.value_or(ErrorCode::internal_error), std::move(payload.text));
}

}  // namespace dagsim::rpc
