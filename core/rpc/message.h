// Message: what RPC agents exchange, before encoding (DESIGN.md, "Wire protocol").
//
// A message is a type, a request id that pairs a response with its request, a flags word, an
// opaque payload (each type's fields, written with WireWriter) and a list of tensors, which travel
// beside the payload as dtype + shape + raw bytes, as PyTorch's Message carries its tensors.
// Type values follow PyTorch's table (torch/csrc/distributed/rpc/message.h): requests carry
// 0x100, responses 0x200, so the wire is recognisable to anyone who knows that table.
// Low values 0x80..0xbf are reserved for services that register handlers on an agent (store,
// rendezvous, tests): a request 0x180 + n is answered by a response 0x280 + n carrying bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/base/assert.h"
#include "core/runtime/transport.h"
#include "core/tensor/tensor.h"

namespace dagsim::rpc {

using runtime::Bytes;

inline constexpr uint16_t kRequest = 0x100;
inline constexpr uint16_t kResponse = 0x200;

enum class MessageType : uint16_t {
  call = 0x00 | kRequest,                         // SCRIPT_CALL: run a registered function
  ret = 0x01 | kResponse,                         // SCRIPT_RET
  remote_call = 0x04 | kRequest,                  // SCRIPT_REMOTE_CALL: run, keep the result as an owner RRef
  remote_ret = 0x06 | kResponse,                  // REMOTE_RET
  rref_fetch_call = 0x07 | kRequest,              // SCRIPT_RREF_FETCH_CALL: to_here
  rref_fetch_ret = 0x09 | kResponse,              // SCRIPT_RREF_FETCH_RET
  rref_user_delete = 0x0b | kRequest,             // RREF_USER_DELETE
  rref_fork_request = 0x0c | kRequest,            // RREF_FORK_REQUEST
  rref_child_accept = 0x0d | kRequest,            // RREF_CHILD_ACCEPT
  rref_ack = 0x0e | kResponse,                    // RREF_ACK
  forward_autograd_req = 0x0f | kRequest,         // FORWARD_AUTOGRAD_REQ: a message with autograd metadata
  forward_autograd_resp = 0x10 | kResponse,       // FORWARD_AUTOGRAD_RESP
  backward_autograd_req = 0x11 | kRequest,        // BACKWARD_AUTOGRAD_REQ: gradients for a send function
  backward_autograd_resp = 0x12 | kResponse,      // BACKWARD_AUTOGRAD_RESP
  cleanup_autograd_context_req = 0x13 | kRequest, // CLEANUP_AUTOGRAD_CONTEXT_REQ
  cleanup_autograd_context_resp = 0x14 | kResponse,
  rref_backward_req = 0x17 | kRequest,            // RREF_BACKWARD_REQ
  rref_backward_resp = 0x18 | kResponse,
  // dagsim's own, beyond PyTorch's table: termination detection of a distributed backward.
  termination_probe_req = 0x40 | kRequest,        // a worker's gradient-message counts for a context
  termination_probe_resp = 0x41 | kResponse,
  backward_abort_req = 0x42 | kRequest,           // fail a context's pass on a worker, with the reason
  backward_abort_resp = 0x43 | kResponse,
  exception = 0x37 | kResponse,                   // EXCEPTION: an error code and text
  // One-way notices (neither request nor response): the heartbeat workload's failure detector.
  heartbeat = 0x50,
};

// The range reserved for services (RpcAgent::add_handler), as low values.
inline constexpr uint16_t kServiceFirst = 0x80;
inline constexpr uint16_t kServiceLast = 0xbf;
inline constexpr uint16_t kServiceCount = kServiceLast - kServiceFirst + 1;

// Service numbers taken, in blocks (a new service takes a free block and says so here).
inline constexpr uint16_t kDistAutogradServices = 0x00;  // 0x00..0x0f: distributed autograd's own
inline constexpr uint16_t kStoreServices = 0x10;         // 0x10..0x1f: the store (to come)
inline constexpr uint16_t kRendezvousServices = 0x20;    // 0x20..0x2f: rendezvous (to come)
inline constexpr uint16_t kTestServices = 0x30;          // 0x30..0x3f: tests' own services

// Service `n`'s request type (0 <= n < kServiceCount).
constexpr MessageType service_request(uint16_t n) {
  DAGSIM_ASSERT(n < kServiceCount);
  return static_cast<MessageType>(kRequest | (kServiceFirst + n));
}
inline bool is_service_type(uint16_t value) {
  const uint16_t high = value & 0xff00;
  const uint16_t low = value & 0x00ff;
  return (high == kRequest || high == kResponse) && low >= kServiceFirst && low <= kServiceLast;
}

// "call", "ret", ..., "service_req" / "service_resp" for the service range; nullptr for a value
// that is not a known type.
const char* message_type_name(MessageType type);
// The request type whose message_type_name is `name` ("cleanup_autograd_context_req"), if any.
std::optional<MessageType> request_type_named(std::string_view name);
bool is_known_message_type(uint16_t value);
inline bool is_request(MessageType type) { return (static_cast<uint16_t>(type) & kRequest) != 0; }
// The response type that answers a request of `request` (besides exception, which answers any):
// PyTorch's pairs (call -> ret, remote_call -> remote_ret, ...), and 0x280 + n for service n.
// REQUIRES: is_request(request).
MessageType response_type_of(MessageType request);

// Message::flags bits.
inline constexpr uint32_t kForceAutograd = 0x1;  // record autograd even without tensors (to_here)

struct Message {
  MessageType type = MessageType::call;
  uint32_t flags = 0;
  uint64_t request_id = 0;
  Bytes payload;
  std::vector<Tensor> tensors;
  // Where each tensor lands at the receiver (device_maps.h); empty when all stay on the cpu.
  // The tensors themselves are on the host on the wire: the sender staged them.
  std::vector<Device> devices;
};

}  // namespace dagsim::rpc
