// RpcAgent, the RRef side (rref.h): the values a node owns, the forks it counts for each, and
// PyTorch's fork protocol between a parent, a child and the owner.
//
// A call that carries an RRef makes a fork of it (fork): a new fork id, and the parent keeps its
// own reference (pending_children_) so the value cannot go while the fork travels. The callee
// (adopt) has the owner count the fork (RREF_FORK_REQUEST, answered RREF_ACK; counted at once
// when the callee is the owner) before it uses it, then tells the parent (RREF_CHILD_ACCEPT),
// which lets go. The parent also lets go when the call ends, whatever way: the callee confirms
// before it runs the function, so a finished call needs no accept, and a callee that died never
// sends one. The owner drops a value once its remote call ran and no fork is left; a fork
// is gone when its handle's last copy goes (RREF_USER_DELETE), or when its holder's life is over
// (a later life of the holder was heard from: note_incarnation).
//
// Where dagsim goes past PyTorch (docs/pytorch_parity.md, "RRef forks"): a child confirms with
// the owner even when the parent is the owner, and before the function runs, so the owner knows
// which life of which worker holds every fork; a holder's earlier lives lose their forks; a value
// whose creator died before its remote call arrived fails its waiters at once; and a use of a
// value the owner dropped lately is refused by name instead of waiting for it afresh.
#include <optional>

#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/rpc/call_messages.h"
#include "core/rpc/rpc_agent.h"

namespace dagsim::rpc {

namespace {
std::string rref_name(uint64_t rref_id) { return "RRef " + std::to_string(rref_id); }
}  // namespace

RRefForkData RpcAgent::fork(const RRef& rref, WorkerId to) {
  DAGSIM_ASSERT_MSG(rref.defined(), "an RRef argument must be defined");
  const uint64_t fork_id = new_global_id();
  const bool fresh = pending_children_.emplace(fork_id, PendingChild{rref, to}).second;
  DAGSIM_ASSERT(fresh);  // fork ids are global ids: never reused
  return RRefForkData{rref.owner(), rref.id(), fork_id, env_.self};
}

void RpcAgent::on_child_accepted(uint64_t fork_id, WorkerId from) {
  // Absent when the call that carried it ended first: nothing left to let go. Only the child
  // itself may say it accepted (another node's word would end the parent's reference too soon).
  auto it = pending_children_.find(fork_id);
  if (it == pending_children_.end()) return;
  if (it->second.child != from) {
    DAGSIM_PROBE("rpc.rref_accept_from_non_child");
    env_.log.event("rref.stray_accept", "fork " + std::to_string(fork_id) + " accepted by node " + std::to_string(from) +
                                            ", not its child, node " + std::to_string(it->second.child));
    return;
  }
  pending_children_.erase(it);
}

void RpcAgent::end_children(const std::vector<uint64_t>& children) {
  for (uint64_t fork_id : children) pending_children_.erase(fork_id);
}

std::vector<RRef> RpcAgent::adopt(WorkerId from, const std::vector<RRefForkData>& forks) {
  std::vector<RRef> handles;
  for (const RRefForkData& f : forks) {
    // The creator's fork is the RRef id itself, counted by its remote call: never forked.
    if (f.parent != from || f.rref_id == 0 || f.fork_id == 0 || f.fork_id == f.rref_id) {
      throw errors::protocol_error(rref_name(f.rref_id) + ": a fork from node " + std::to_string(from) + " names node " +
                                   std::to_string(f.parent) + " as its parent, or no RRef, no fork or the creator's fork");
    }
    if (f.owner == env_.self) {
      // Refused only for an earlier life or the creator's fork, neither of which this can be.
      const bool counted = add_fork(f.rref_id, f.fork_id, Holder{env_.self, env_.incarnation});
      DAGSIM_ASSERT(counted);
    } else {
      try {
        request(f.owner, make_rref_request(MessageType::rref_fork_request, 0, f.rref_id, f.fork_id), "RRef fork request")
            .get();
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        // The owner may have counted it and its answer been lost: take it back (a delete of a
        // fork it never counted is only logged there).
        if (e.code() == ErrorCode::timed_out || e.code() == ErrorCode::connection_failed) {
          DAGSIM_PROBE("rpc.rref_fork_taken_back_after_lost_answer");
          send_user_delete(f.owner, f.rref_id, f.fork_id);
        }
        throw Error(e.code(), rref_name(f.rref_id) + " from node " + std::to_string(from) + ": its owner, node " +
                                  std::to_string(f.owner) + ", did not count the fork: " + e.detail());
      }
    }
    // Counted: from here on the handle's last copy tells the owner it is gone.
    handles.emplace_back(*this, f.owner, f.rref_id, f.fork_id);
    if (f.parent == env_.self) {
      on_child_accepted(f.fork_id, env_.self);
    } else {
      try {  // fire and forget: the parent also lets go when its call ends
        request(f.parent, make_rref_request(MessageType::rref_child_accept, 0, f.rref_id, f.fork_id), "RRef child accept");
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);  // cancelled while it waited for room to send
      }
    }
  }
  DAGSIM_ASSERT(handles.size() == forks.size());
  return handles;
}

void RpcAgent::send_user_delete(WorkerId owner, uint64_t rref_id, uint64_t fork_id, uint32_t attempt) {
  // Called from RRef's destructor too, so it never throws: a node that is dying or an agent that
  // is shut down has nothing to send with (its handles die with it; its owner reclaims their forks
  // when it hears from the node's next life).
  try {
    Future<std::vector<Tensor>> reply =
        request(owner, make_rref_request(MessageType::rref_user_delete, 0, rref_id, fork_id), "RRef user delete");
    // A retry needs a node fiber to spawn from: a handle dropped outside one (by the driver, at
    // teardown) sends its delete once.
    const runtime::FiberContext* fiber = runtime::current_fiber();
    if (fiber == nullptr || fiber->spawner == nullptr) return;
    reply.then([this, alive = std::weak_ptr<int>(alive_), env = &env_, owner, rref_id, fork_id,
                attempt](Future<std::vector<Tensor>> done) {
      if (!done.has_error() || alive.expired()) return;
      try {
        done.get();
      } catch (const Error& e) {
        // An answer that refuses it (not the holder) is final; only a lost one is tried again.
        if (e.code() != ErrorCode::timed_out && e.code() != ErrorCode::connection_failed) return;
        if (attempt >= kSendRetries) {
          DAGSIM_PROBE("rpc.rref_delete_gave_up");
          env->log.event("rref.delete_failed", rref_name(rref_id) + ": fork " + std::to_string(fork_id) + " on node " +
                                                   std::to_string(owner) + ": gave up after retries: " + e.detail());
          return;
        }
      }
      DAGSIM_PROBE("rpc.rref_delete_retried");
      env->clock.sleep(retry_backoff(attempt));
      if (!alive.expired()) send_user_delete(owner, rref_id, fork_id, attempt + 1);
    });
  } catch (const Error&) {
  }
}

bool RpcAgent::life_over(WorkerId worker, uint32_t incarnation) const {
  auto life = incarnations_.find(worker);
  return worker != env_.self && life != incarnations_.end() && life->second > incarnation;
}

bool RpcAgent::add_fork(uint64_t rref_id, uint64_t fork_id, Holder holder) {
  if (life_over(holder.worker, holder.incarnation)) return false;  // a later life was heard from: this one holds nothing
  std::shared_ptr<Owned> owned = owned_slot(rref_id);
  if (fork_id == rref_id && owned->creator_released) return false;
  const bool fresh = owned->forks.emplace(fork_id, holder).second;
  if (!fresh) throw errors::protocol_error(rref_name(rref_id) + ": fork " + std::to_string(fork_id) + " counted twice");
  return true;
}

void RpcAgent::release_fork(uint64_t rref_id, uint64_t fork_id) {
  auto it = owned_.find(rref_id);
  if (it != owned_.end() && it->second->forks.erase(fork_id) == 1) {
    drop_if_unused(rref_id);
    return;
  }
  // Not counted: the creator's fork, deleted before its remote call ran here (handlers run in any
  // order). Any other fork is counted before its handle exists, so this is a stray delete.
  if (fork_id == rref_id && !life_over(worker_of(rref_id), incarnation_of(rref_id)) && dropped_.count(rref_id) == 0) {
    std::shared_ptr<Owned> owned = owned_slot(rref_id);
    if (!owned->started) {
      DAGSIM_PROBE("rpc.rref_creator_released_before_remote_call");
      owned->creator_released = true;
      return;
    }
  }
  DAGSIM_PROBE("rpc.rref_stray_delete");
  env_.log.event("rref.stray_delete", rref_name(rref_id) + ": fork " + std::to_string(fork_id) + " is not counted here");
}

void RpcAgent::drop_if_unused(uint64_t rref_id) {
  auto it = owned_.find(rref_id);
  if (it == owned_.end() || !it->second->forks.empty()) return;
  if (!it->second->started) return;  // its remote call may still come: its creator lives
  // A remote call still running keeps its slot (shared) and sets the value nobody will read.
  owned_.erase(it);
  env_.log.event("rref.dropped", std::to_string(rref_id));
  // Remembered a while, so a use that comes later is refused rather than waiting for a value that
  // was made and is gone (a fork whose parent died or let go before the owner counted it).
  const runtime::TimePoint now = env_.clock.now();
  dropped_.insert(rref_id);
  dropped_order_.emplace_back(now, rref_id);
  while (dropped_order_.front().first + 2 * options_.default_timeout < now) {
    dropped_.erase(dropped_order_.front().second);
    dropped_order_.pop_front();
  }
  DAGSIM_ASSERT(owned_.count(rref_id) == 0);
}

void RpcAgent::note_incarnation(WorkerId peer, uint32_t incarnation) {
  DAGSIM_ASSERT(peer != env_.self);
  auto [life, first] = incarnations_.emplace(peer, incarnation);
  if (!first) {
    if (incarnation <= life->second) return;
    life->second = incarnation;
  }
  // Forks held by `peer`'s earlier lives are gone with them: their handles died with the process.
  std::vector<uint64_t> touched;
  for (auto& [rref_id, owned] : owned_) {
    size_t reclaimed = 0;
    for (auto fork = owned->forks.begin(); fork != owned->forks.end();) {
      if (fork->second.worker == peer && fork->second.incarnation < incarnation) {
        fork = owned->forks.erase(fork);
        ++reclaimed;
      } else {
        ++fork;
      }
    }
    if (worker_of(rref_id) == peer && incarnation_of(rref_id) < incarnation && !owned->started) {
      abandon(rref_id, *owned);
      touched.push_back(rref_id);
    }
    if (reclaimed == 0) continue;
    DAGSIM_PROBE("rpc.rref_forks_reclaimed_from_dead_life");
    if (touched.empty() || touched.back() != rref_id) touched.push_back(rref_id);
    env_.log.event("rref.forks_reclaimed", rref_name(rref_id) + ": " + std::to_string(reclaimed) + " fork(s) of node " +
                                               std::to_string(peer) + "'s earlier life");
  }
  for (uint64_t rref_id : touched) drop_if_unused(rref_id);
}

Message RpcAgent::serve_rref_request(WorkerId from, uint32_t from_incarnation, const Message& request) {
  DAGSIM_ASSERT(is_rref_request(request.type) && request.type != MessageType::rref_fetch_call);
  try {
    const RRefRequest r = read_rref_request(request);
    if (r.rref_id == 0 || r.fork_id == 0) throw errors::protocol_error("an RRef request names no RRef or no fork");
    if (request.type == MessageType::rref_user_delete) {
      if (r.fork_id == r.rref_id && from != worker_of(r.rref_id)) {
        throw errors::protocol_error(rref_name(r.rref_id) + ": node " + std::to_string(from) +
                                     " deletes the creator's fork, which node " + std::to_string(worker_of(r.rref_id)) + " holds");
      }
      auto it = owned_.find(r.rref_id);
      const Owned* owned = it == owned_.end() ? nullptr : it->second.get();
      if (owned != nullptr && owned->forks.count(r.fork_id) != 0 && owned->forks.at(r.fork_id).worker != from) {
        throw errors::protocol_error(rref_name(r.rref_id) + ": node " + std::to_string(from) + " deletes fork " +
                                     std::to_string(r.fork_id) + ", which node " +
                                     std::to_string(owned->forks.at(r.fork_id).worker) + " holds");
      }
      release_fork(r.rref_id, r.fork_id);
    } else if (request.type == MessageType::rref_fork_request) {
      if (r.fork_id == r.rref_id || !add_fork(r.rref_id, r.fork_id, Holder{from, from_incarnation})) {
        DAGSIM_PROBE("rpc.rref_fork_refused");
        throw errors::invalid_argument(rref_name(r.rref_id) + ": fork " + std::to_string(r.fork_id) + " of node " +
                                       std::to_string(from) + " cannot be counted (released already, or from a life that is over)");
      }
    } else {
      on_child_accepted(r.fork_id, from);
    }
    return make_reply(MessageType::rref_ack, request.request_id);
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    return make_exception(request.request_id, env_.self, e);
  }
}

std::vector<Tensor> RpcAgent::rref_values(const std::string& function, const std::vector<RRef>& rrefs) {
  // Builtins cannot take an RRef, so they get every value; a user function gets the values of
  // those this node owns (PyTorch's local_value) and handles for the rest.
  const bool builtin = registry_.is_builtin(function);
  std::vector<std::optional<Future<std::vector<Tensor>>>> fetches;
  for (const RRef& rref : rrefs) {  // every fetch at once, before waiting for any
    fetches.push_back(!rref.is_owner() && builtin ? std::optional(rref.to_here_async()) : std::nullopt);
  }
  std::vector<Tensor> values;
  for (size_t i = 0; i < rrefs.size(); ++i) {
    if (!rrefs[i].is_owner() && !builtin) continue;
    for (const Tensor& t : rrefs[i].is_owner() ? owned_value(rrefs[i].id()) : fetches[i]->get()) values.push_back(t);
  }
  return values;
}

size_t RpcAgent::forks_of(uint64_t rref_id) const {
  auto it = owned_.find(rref_id);
  return it == owned_.end() ? 0 : it->second->forks.size();
}

size_t RpcAgent::owned_values() const {
  size_t made = 0;
  for (const auto& [rref_id, owned] : owned_) made += owned->started ? 1 : 0;
  return made;
}

bool RpcAgent::counts_fork(uint64_t rref_id, uint64_t fork_id) const {
  auto it = owned_.find(rref_id);
  return it != owned_.end() && it->second->forks.count(fork_id) != 0;
}

std::string RpcAgent::owned_report() const {
  std::string text;
  for (const auto& [rref_id, owned] : owned_) {
    text += rref_name(rref_id) + (owned->started ? ", made" : ", not made yet") + (owned->creator_released ? ", creator released" : "");
    for (const auto& [fork_id, holder] : owned->forks) {
      text += "; fork " + std::to_string(fork_id) + " held by node " + std::to_string(holder.worker) + " life " +
              std::to_string(holder.incarnation);
    }
    text += "\n";
  }
  return text;
}

void RpcAgent::abandon(uint64_t rref_id, Owned& owned) {
  DAGSIM_ASSERT(!owned.started && life_over(worker_of(rref_id), incarnation_of(rref_id)));
  DAGSIM_PROBE("rpc.rref_abandoned_creator_died");
  // Its creator died before its remote call arrived: the value will never be made (a late call
  // is refused), so whoever waits for it or holds a fork hears so now, not at a timeout.
  owned.started = true;
  owned.promise.set_exception(std::make_exception_ptr(errors::connection_failed(
      rref_name(rref_id) + ": its creator, node " + std::to_string(worker_of(rref_id)) +
      ", died before its remote call reached the owner, node " + std::to_string(env_.self))));
}

std::shared_ptr<RpcAgent::Owned> RpcAgent::owned_slot(uint64_t rref_id) {
  std::shared_ptr<Owned>& slot = owned_[rref_id];
  if (!slot) {
    if (dropped_.count(rref_id) != 0) {
      // A fork whose parent died or let go before the owner counted it: the value went with the
      // last counted fork.
      DAGSIM_PROBE("rpc.rref_fork_after_parent_died");
      owned_.erase(rref_id);
      throw errors::connection_failed(rref_name(rref_id) + ": its value is gone from node " + std::to_string(env_.self) +
                                      ": its last fork went before this use was counted (the parent that passed it on died or let go first)");
    }
    if (life_over(worker_of(rref_id), incarnation_of(rref_id))) {
      DAGSIM_PROBE("rpc.rref_use_after_creator_died");
      owned_.erase(rref_id);
      throw errors::connection_failed(rref_name(rref_id) + ": its creator, node " + std::to_string(worker_of(rref_id)) +
                                      ", died, and node " + std::to_string(env_.self) + " holds no value for it");
    }
    slot = std::make_shared<Owned>();
    slot->value = slot->promise.get_future();
    env_.log.event("rref.opened", std::to_string(rref_id));
  }
  DAGSIM_ASSERT(slot->value.valid());
  return slot;
}

std::vector<Tensor> RpcAgent::owned_value(uint64_t rref_id) {
  // A use may be served before the remote call that creates the value (handlers run in any order
  // under a random schedule): the slot is made by whichever comes first, as PyTorch's owner makes
  // its OwnerRRef on first reference. A remote call that never comes ends the wait after the RPC
  // timeout.
  DAGSIM_ASSERT_MSG(runtime::current_fiber() != nullptr, "owned_value may wait for its remote call");
  std::shared_ptr<Owned> owned = owned_slot(rref_id);
  if (owned->started) return owned->value.get();
  try {
    return owned->value.get_until(env_.clock.now() + options_.default_timeout);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::timed_out) throw;
    // Its remote call began meanwhile: it ends by its own calls' timeouts, with their error.
    if (owned->started) return owned->value.get();
    DAGSIM_PROBE("rpc.rref_value_never_created");
    // Forget the slot only if it records nothing else: a fork counted on it, or the creator's
    // delete, must wait for the remote call that may still come.
    if (auto it = owned_.find(rref_id); it != owned_.end() && it->second == owned && owned->forks.empty() &&
                                        !owned->creator_released) {
      owned_.erase(it);
    }
    throw errors::invalid_argument(rref_name(rref_id) + " is not owned by node " + std::to_string(env_.self) +
                                   ": no remote call created it");
  }
}

}  // namespace dagsim::rpc
