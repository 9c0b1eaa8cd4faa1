#include "core/dist_autograd/autograd_messages.h"

#include "core/base/error.h"
#include "core/rpc/call_messages.h"

namespace dagsim::dist_autograd {

using rpc::Message;
using rpc::MessageType;

Message wrap_with_autograd(MessageType type, const Message& inner, const AutogradMetadata& meta) {
  DAGSIM_ASSERT(type == MessageType::forward_autograd_req || type == MessageType::forward_autograd_resp);
  // Paired with unwrap_autograd's checks: a wrapper wraps a plain message of its own direction.
  DAGSIM_ASSERT(inner.type != MessageType::forward_autograd_req && inner.type != MessageType::forward_autograd_resp);
  DAGSIM_ASSERT(rpc::is_request(inner.type) == (type == MessageType::forward_autograd_req));
  ForwardHeader header{static_cast<uint16_t>(inner.type), inner.flags, meta.context, meta.message, meta.from, {}, inner.payload};
  header.requires_grad.reserve(inner.tensors.size());
  for (const Tensor& t : inner.tensors) header.requires_grad.push_back(t.requires_grad());
  Message m = rpc::make_message(type, inner.request_id, header);
  m.tensors = inner.tensors;
  return m;
}

WithAutograd unwrap_autograd(const Message& message) {
  if (message.type != MessageType::forward_autograd_req && message.type != MessageType::forward_autograd_resp) {
    throw errors::protocol_error(std::string("unwrap_autograd: a ") + rpc::message_type_name(message.type) +
                                 " message carries no autograd metadata");
  }
  ForwardHeader header = rpc::from_bytes<ForwardHeader>(message.payload);
  const uint16_t wrapped = header.wrapped_type;
  const bool request = message.type == MessageType::forward_autograd_req;
  // Only what outgoing_call and serve_call wrap: calls (and RRef fetches) one way, their results
  // the other. Anything else inside would reach code that serves only those (run_call).
  const auto is = [wrapped](MessageType t) { return wrapped == static_cast<uint16_t>(t); };
  const bool wrappable = request ? is(MessageType::call) || is(MessageType::remote_call) || is(MessageType::rref_fetch_call)
                                 : is(MessageType::ret) || is(MessageType::rref_fetch_ret);
  if (!rpc::is_known_message_type(wrapped) || !wrappable) {
    throw errors::protocol_error("autograd.wrapped_type: a " + std::string(rpc::message_type_name(message.type)) +
                                 " cannot wrap message type " + std::to_string(wrapped));
  }
  if (header.requires_grad.size() != message.tensors.size()) {
    throw errors::protocol_error("autograd.requires_grad: " + std::to_string(header.requires_grad.size()) + " flags for " +
                                 std::to_string(message.tensors.size()) + " tensors");
  }
  WithAutograd out;
  out.inner.type = static_cast<MessageType>(wrapped);
  out.inner.flags = header.wrapped_flags;
  out.inner.request_id = message.request_id;
  out.inner.payload = std::move(header.payload);
  out.inner.tensors = message.tensors;
  out.meta = {header.context, header.message, header.from};
  out.requires_grad = std::move(header.requires_grad);
  // What record_recv requires: one flag per tensor, and a plain message inside.
  DAGSIM_ASSERT(out.requires_grad.size() == out.inner.tensors.size() &&
                out.inner.type != MessageType::forward_autograd_req && out.inner.type != MessageType::forward_autograd_resp);
  return out;
}

}  // namespace dagsim::dist_autograd
