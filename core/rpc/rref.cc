#include "core/rpc/rref.h"

#include "core/base/error.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/rpc_agent.h"

namespace dagsim::rpc {

struct RRef::State {
  RpcAgent* agent;
  WorkerId owner;
  uint64_t id;
  uint64_t fork_id;

  ~State() {
    DAGSIM_ASSERT(agent != nullptr && id != 0 && fork_id != 0);
    // The last copy of this fork is gone: the owner forgets it (fire and forget; a failure means
    // the owner or its connection is gone, and the value with it).
    if (owner == agent->self()) {
      agent->release_fork(id, fork_id);
      return;
    }
    if (agent->forget_user_fork(fork_id)) agent->send_user_delete(owner, id, fork_id);  // else shutdown() did
  }
};

// Built in place: a temporary State's destructor would send the user delete at once.
RRef::RRef(RpcAgent& agent, WorkerId owner, uint64_t id, uint64_t fork_id) : state_(new State{&agent, owner, id, fork_id}) {
  // RRef and fork ids come from their makers' global ids (RpcAgent::new_global_id): never 0.
  DAGSIM_ASSERT(id != 0 && fork_id != 0);
  if (owner != agent.self()) agent.note_user_fork(owner, id, fork_id);
}

WorkerId RRef::owner() const {
  DAGSIM_ASSERT(defined());
  return state_->owner;
}

uint64_t RRef::id() const {
  DAGSIM_ASSERT(defined());
  return state_->id;
}

uint64_t RRef::fork_id() const {
  DAGSIM_ASSERT(defined());
  return state_->fork_id;
}

bool RRef::is_owner() const { return defined() && state_->owner == state_->agent->self(); }

std::vector<Tensor> RRef::to_here(std::optional<runtime::Duration> timeout) const {
  // On the owner, PyTorch returns the owned value itself (local_value), not a copy: a parameter
  // server looks its gradients up by the tensors it owns (test_trainer_ps).
  if (is_owner()) return state_->agent->owned_value(state_->id);
  return to_here_async(timeout).get();
}

runtime::Future<std::vector<Tensor>> RRef::to_here_async(std::optional<runtime::Duration> timeout) const {
  DAGSIM_ASSERT_MSG(defined(), "to_here on an undefined RRef");
  if (is_owner()) return state_->agent->owned_future(state_->id);
  Message fetch = make_rref_request(MessageType::rref_fetch_call, 0, state_->id, state_->fork_id);
  fetch.flags |= kForceAutograd;
  return state_->agent->send_request(state_->owner, std::move(fetch), "RRef fetch", timeout);
}

}  // namespace dagsim::rpc
