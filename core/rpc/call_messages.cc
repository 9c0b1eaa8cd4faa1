#include "core/rpc/call_messages.h"

#include "core/rpc/wire.h"

namespace dagsim::rpc {

Message make_call(uint64_t request_id, const std::string& function, const CallArgs& args) {
  Message m;
  m.type = MessageType::call;
  m.request_id = request_id;
  WireWriter w(m.payload);
  w.string(function);
  w.u32(static_cast<uint32_t>(args.attributes.size()));
  for (const auto& [name, value] : args.attributes) {
    w.string(name);
    w.f64(value);
  }
  w.u32(static_cast<uint32_t>(args.rrefs.size()));
  for (uint64_t id : args.rrefs) w.u64(id);
  m.tensors = args.tensors;
  return m;
}

Call read_call(const Message& message) {
  WireReader r(message.payload);
  Call call;
  call.function = r.string("call.function", kMaxFunctionName);
  const uint32_t count = r.u32("call.attribute_count");
  if (count > kMaxAttributes) {
    throw errors::protocol_error("call.attribute_count: " + std::to_string(count) + " exceeds the limit of " +
                                 std::to_string(kMaxAttributes));
  }
  for (uint32_t i = 0; i < count; ++i) {
    std::string name = r.string("call.attribute.name", kMaxAttributeName);
    call.args.attributes[std::move(name)] = r.f64("call.attribute.value");
  }
  const uint32_t rrefs = r.u32("call.rref_count");
  if (rrefs > kMaxAttributes) {
    throw errors::protocol_error("call.rref_count: " + std::to_string(rrefs) + " exceeds the limit of " +
                                 std::to_string(kMaxAttributes));
  }
  for (uint32_t i = 0; i < rrefs; ++i) call.args.rrefs.push_back(r.u64("call.rref_id"));
  r.expect_end("call");
  call.args.tensors = message.tensors;
  return call;
}

Message make_ret(uint64_t request_id, std::vector<Tensor> results) {
  Message m;
  m.type = MessageType::ret;
  m.request_id = request_id;
  m.tensors = std::move(results);
  return m;
}

Message make_remote_call(uint64_t request_id, uint64_t rref_id, const std::string& function, const CallArgs& args) {
  Message call = make_call(request_id, function, args);
  Message m;
  m.type = MessageType::remote_call;
  m.request_id = request_id;
  WireWriter w(m.payload);
  w.u64(rref_id);
  w.bytes(call.payload);
  m.tensors = std::move(call.tensors);
  return m;
}

std::pair<uint64_t, Call> read_remote_call(const Message& message) {
  WireReader r(message.payload);
  const uint64_t rref_id = r.u64("remote_call.rref_id");
  Message inner;
  inner.type = MessageType::call;
  const auto rest = r.bytes(r.remaining(), "remote_call.call");
  inner.payload.assign(rest.begin(), rest.end());
  inner.tensors = message.tensors;
  return {rref_id, read_call(inner)};
}

Message make_id_request(MessageType type, uint64_t request_id, uint64_t id) {
  Message m;
  m.type = type;
  m.request_id = request_id;
  WireWriter w(m.payload);
  w.u64(id);
  return m;
}

uint64_t read_id_request(const Message& message, const char* field) {
  WireReader r(message.payload);
  const uint64_t id = r.u64(field);
  r.expect_end(message_type_name(message.type));
  return id;
}

Message make_reply(MessageType type, uint64_t request_id, std::vector<Tensor> tensors) {
  Message m;
  m.type = type;
  m.request_id = request_id;
  m.tensors = std::move(tensors);
  return m;
}

Message make_exception(uint64_t request_id, WorkerId node, const Error& error) {
  Message m;
  m.type = MessageType::exception;
  m.request_id = request_id;
  WireWriter w(m.payload);
  w.u32(static_cast<uint32_t>(error.code()));
  w.u16(node);
  std::string text = error.detail();
  // Nested remote errors already say where they came from; say it once.
  if (text.rfind("Error on Node ", 0) != 0) text = "Error on Node " + std::to_string(node) + ": " + text;
  if (text.size() > kMaxErrorText) text.resize(kMaxErrorText);
  w.string(text);
  return m;
}

Error read_exception(const Message& message) {
  WireReader r(message.payload);
  const uint32_t code = r.u32("exception.code");
  r.u16("exception.node");
  std::string text = r.string("exception.text", kMaxErrorText);
  r.expect_end("exception");
  const std::optional<ErrorCode> known = error_code_from_int(static_cast<int>(code));
  return Error(known.value_or(ErrorCode::internal_error), std::move(text));
}

}  // namespace dagsim::rpc
