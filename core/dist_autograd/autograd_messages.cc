#include "core/dist_autograd/autograd_messages.h"

#include "core/base/error.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/wire.h"

namespace dagsim::dist_autograd {

using rpc::Message;
using rpc::MessageType;
using rpc::WireReader;
using rpc::WireWriter;

Message wrap_with_autograd(MessageType type, const Message& inner, const AutogradMetadata& meta) {
  DAGSIM_ASSERT(type == MessageType::forward_autograd_req || type == MessageType::forward_autograd_resp);
  Message m;
  m.type = type;
  m.request_id = inner.request_id;
  WireWriter w(m.payload);
  w.u16(static_cast<uint16_t>(inner.type));
  w.u32(inner.flags);
  w.i64(meta.context);
  w.i64(meta.message);
  w.u16(meta.from);
  w.u32(static_cast<uint32_t>(inner.tensors.size()));
  for (const Tensor& t : inner.tensors) w.u8(t.requires_grad() ? 1 : 0);
  w.u32(static_cast<uint32_t>(inner.payload.size()));
  w.bytes(inner.payload);
  m.tensors = inner.tensors;
  return m;
}

WithAutograd unwrap_autograd(const Message& message) {
  if (message.type != MessageType::forward_autograd_req && message.type != MessageType::forward_autograd_resp) {
    throw errors::protocol_error(std::string("unwrap_autograd: a ") + rpc::message_type_name(message.type) +
                                 " message carries no autograd metadata");
  }
  WireReader r(message.payload);
  WithAutograd out;
  const uint16_t wrapped = r.u16("autograd.wrapped_type");
  if (!rpc::is_known_message_type(wrapped) || wrapped == static_cast<uint16_t>(MessageType::forward_autograd_req) ||
      wrapped == static_cast<uint16_t>(MessageType::forward_autograd_resp)) {
    throw errors::protocol_error("autograd.wrapped_type: cannot wrap message type " + std::to_string(wrapped));
  }
  out.inner.type = static_cast<MessageType>(wrapped);
  out.inner.flags = r.u32("autograd.wrapped_flags");
  out.inner.request_id = message.request_id;
  out.meta.context = r.i64("autograd.context_id");
  out.meta.message = r.i64("autograd.message_id");
  out.meta.from = r.u16("autograd.from_worker");
  const uint32_t count = r.u32("autograd.tensor_count");
  if (count != message.tensors.size()) {
    throw errors::protocol_error("autograd.tensor_count: " + std::to_string(count) + " flags for " +
                                 std::to_string(message.tensors.size()) + " tensors");
  }
  out.requires_grad.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t flag = r.u8("autograd.requires_grad");
    if (flag > 1) throw errors::protocol_error("autograd.requires_grad: " + std::to_string(flag) + " is not 0 or 1");
    out.requires_grad.push_back(flag == 1);
  }
  const uint32_t inner_length = r.u32("autograd.payload_length");
  const auto inner = r.bytes(inner_length, "autograd.payload");
  out.inner.payload.assign(inner.begin(), inner.end());
  r.expect_end("forward_autograd");
  out.inner.tensors = message.tensors;
  return out;
}

Message make_backward_request(uint64_t request_id, const BackwardRequest& request) {
  Message m;
  m.type = MessageType::backward_autograd_req;
  m.request_id = request_id;
  WireWriter w(m.payload);
  w.i64(request.context);
  w.i64(request.message);
  w.u8(request.retain_graph ? 1 : 0);
  m.tensors = request.grads;
  return m;
}

BackwardRequest read_backward_request(const Message& message) {
  WireReader r(message.payload);
  BackwardRequest out;
  out.context = r.i64("backward.context_id");
  out.message = r.i64("backward.message_id");
  const uint8_t retain = r.u8("backward.retain_graph");
  if (retain > 1) throw errors::protocol_error("backward.retain_graph: " + std::to_string(retain) + " is not 0 or 1");
  out.retain_graph = retain == 1;
  r.expect_end("backward_autograd_req");
  out.grads = message.tensors;
  return out;
}

Message make_cleanup_request(uint64_t request_id, ContextId context) {
  return rpc::make_id_request(MessageType::cleanup_autograd_context_req, request_id, static_cast<uint64_t>(context));
}

ContextId read_cleanup_request(const Message& message) {
  return static_cast<ContextId>(rpc::read_id_request(message, "cleanup.context_id"));
}

}  // namespace dagsim::dist_autograd
