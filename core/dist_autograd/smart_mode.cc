// SMART mode's discovery (dist_engine.h, BackwardMode::smart; PyTorch RFC #23110, never built
// there). Before the pass, the initiator walks its graph from the roots; every recv function it
// reaches names a send function on a peer, which is marked there as needed, and the peer walks on
// from it in turn. When the initiator's walk returns, every send function the roots reach on any
// worker is marked, and each node's pass runs only those: an RPC whose result was unused has an
// unmarked send function, which nobody waits for. A walk never revisits a marked send function, so
// it ends (cycles through self-calls and nested calls included), and each mark request is answered
// only after everything it led to is marked, so the initiator starts the pass on a complete set.
#include "core/dist_autograd/dist_engine.h"

#include "core/base/error.h"

namespace dagsim::dist_autograd {

void DistEngine::discover(DistAutogradContext& context, uint64_t token, std::vector<autograd::Node*> start) {
  DAGSIM_ASSERT(token != 0);
  std::map<WorkerId, std::vector<MessageId>> peers;  // ordered: requests go out in worker order
  std::set<const autograd::Node*> seen;
  std::vector<autograd::Node*> stack = std::move(start);
  while (!stack.empty()) {
    autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (const auto* recv = dynamic_cast<const RecvRpcBackward*>(node)) {
      if (recv->from_worker() != agent_.self()) {
        peers[recv->from_worker()].push_back(recv->message_id());
      } else if (context.mark_needed(token, recv->message_id())) {
        stack.push_back(context.retrieve_send_function(recv->message_id()).get());  // a call to itself
      }
      continue;
    }
    for (const autograd::Edge& e : node->next_edges()) {
      if (e.is_valid()) stack.push_back(e.function.get());
    }
  }
  // Every peer at once; a failure (a dead peer, a released context) fails the backward.
  std::vector<runtime::Future<rpc::Bytes>> replies;
  for (auto& [peer, sends] : peers) {
    SmartMarkRequest request{context.context_id(), token, std::move(sends)};
    replies.push_back(agent_.request_bytes(peer, kSmartMarkRequest, rpc::to_bytes(request), options_.backward_timeout,
                                           "SMART-mode discovery of context " + std::to_string(context.context_id())));
  }
  for (auto& reply : replies) reply.get();
}

void DistEngine::mark(const SmartMarkRequest& request) {
  if (request.token == 0) throw errors::protocol_error("SMART-mode discovery without a token");
  std::shared_ptr<DistAutogradContext> context = container_.share_context(request.context);
  std::vector<autograd::Node*> fresh;
  for (MessageId id : request.sends) {
    std::shared_ptr<autograd::Node> send = context->retrieve_send_function(id);  // names an unknown id
    if (context->mark_needed(request.token, id)) fresh.push_back(send.get());
  }
  if (!fresh.empty()) discover(*context, request.token, std::move(fresh));
}

}  // namespace dagsim::dist_autograd
