// RRef: a reference to a value kept on its owner (PyTorch's RRef, from rpc.remote).
//
// remote(to, f, args) asks `to` to run f and keep the result; the caller gets a user RRef at once.
// to_here() fetches the value (inside a distributed autograd context the fetch is always
// recorded, so gradients flow back to the owner's graph and from there to the caller's inputs);
// on the owner it is the owned value itself, as PyTorch's local_value(). RRef.backward is
// DistAutograd::rref_backward (RREF_BACKWARD_REQ).
//
// Sharing: an RRef passed in a call's arguments (CallArgs::rrefs) reaches the callee as a fork, by
// PyTorch's protocol (rref_forks.cc): the parent keeps its own reference until the child has told
// the owner (RREF_FORK_REQUEST) and the owner has counted the fork, and the owner keeps the value
// while any fork lives. Each handle is one fork (its fork id); its copies on one node share it, and
// when the last copy goes the owner is told (RREF_USER_DELETE). The promise: the owner never
// deletes a value while a fork it confirmed is alive.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/base/ids.h"
#include "core/runtime/clock.h"
#include "core/runtime/future.h"
#include "core/tensor/tensor.h"

namespace dagsim::rpc {

class RpcAgent;

// What an RRef argument carries on the wire (PyTorch's RRefForkData): whose value it is, which
// fork of it the callee gets, and which node forked it (the caller, told when the child accepted).
struct RRefForkData {
  WorkerId owner = 0;
  uint64_t rref_id = 0;
  uint64_t fork_id = 0;
  WorkerId parent = 0;
};

class RRef {
 public:
  RRef() = default;
  // A handle for fork `fork_id` of RRef `id` (the creator's fork is the RRef id itself). Made by
  // the agent only, once the fork is counted or on its way to be (RpcAgent::remote, adopt).
  RRef(RpcAgent& agent, WorkerId owner, uint64_t id, uint64_t fork_id);

  bool defined() const { return state_ != nullptr; }
  WorkerId owner() const;
  uint64_t id() const;
  uint64_t fork_id() const;
  bool is_owner() const;

  // The value, fetched from the owner (or read locally on the owner). Throws the remote
  // function's error ("Error on Node N: ..."), timed_out, or connection_failed.
  std::vector<Tensor> to_here(std::optional<runtime::Duration> timeout = std::nullopt) const;
  // The same fetch, without waiting for it (dagsim's: PyTorch has only to_here): a caller that
  // needs many values asks every owner at once.
  runtime::Future<std::vector<Tensor>> to_here_async(std::optional<runtime::Duration> timeout = std::nullopt) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace dagsim::rpc
