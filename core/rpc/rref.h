// RRef: a reference to a value kept on its owner (PyTorch's RRef, from rpc.remote).
//
// remote(to, f, args) asks `to` to run f and keep the result; the caller gets a user RRef at once.
// to_here() fetches the value (inside a distributed autograd context the fetch is always
// recorded, so gradients flow back to the owner's graph and from there to the caller's inputs);
// on the owner it is the owned value itself, as PyTorch's local_value(). When the last copy of a user RRef goes, the owner is told
// (RREF_USER_DELETE) and drops the value. RRef.backward is DistAutograd::rref_backward (RREF_BACKWARD_REQ).
// Not built yet: forking an RRef to a third worker.
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

class RRef {
 public:
  RRef() = default;
  RRef(RpcAgent& agent, WorkerId owner, uint64_t id);

  bool defined() const { return state_ != nullptr; }
  WorkerId owner() const;
  uint64_t id() const;
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
