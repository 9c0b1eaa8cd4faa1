// RequestAdmission: how many requests a node serves at once, and what happens to the rest, so a
// fast or hostile peer cannot grow a node's memory without bound (issue 23, item 3).
//
// Every request a node serves runs on a fiber of its own (a call may make RPCs and block), and a
// fiber costs a stack. So the agent starts at most `max_serving` handler fibers in all and at most
// `max_serving_per_peer` for any one peer; a request past either waits, decoded, in its peer's
// FIFO backlog, and starts when a fiber of the node frees up, the peers with waiting requests
// taking turns (one peer's flood cannot starve another's calls). The backlogs together hold at most
// `max_backlog_bytes` of frames; a request past that is refused at once with `overloaded`, an
// error reply that costs no fiber, so the caller learns why instead of waiting for its timeout.
// Replies are never held back: a fiber waiting on one must always be able to finish.
//
// Memory for requests is then bounded by max_serving stacks plus max_backlog_bytes, whatever the
// peers send. PyTorch's TensorPipe agent queues requests for its thread pool without a bound.
//
// A request that waits on something other than this node's work (a store watch, a wait for keys)
// may be parked: it steps out of the serving count, up to max_parked_per_peer per peer, so waiting
// calls cannot take every fiber the node has. Before, a store serving 1,024 watching nodes (a
// rendezvous of 2,048) had every handler fiber asleep in a watch and the joins' writes queued
// behind them until a watch timed out: the formation stalled. Parked requests still cost a stack
// each, bounded by max_parked_per_peer per peer.
//
// Pure bookkeeping, no fibers: RpcAgent calls it from its listener and its handler fibers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>

#include "core/base/ids.h"
#include "core/rpc/message.h"

namespace dagsim::rpc {

struct AdmissionLimits {
  size_t max_serving = 1024;
  size_t max_serving_per_peer = 256;
  size_t max_backlog_bytes = size_t{64} << 20;
  size_t max_parked_per_peer = 16;
};

struct WaitingRequest {
  WorkerId from = 0;
  uint32_t from_incarnation = 0;
  Message message;
  size_t bytes = 0;  // the frame's size, what it counts against max_backlog_bytes
};

class RequestAdmission {
 public:
  explicit RequestAdmission(AdmissionLimits limits);

  // Whether a request from `from` may start now (it is then counted as serving): a fiber is free
  // in all and for `from`, and none of `from`'s requests waits before it (FIFO per peer).
  bool try_start(WorkerId from);
  // Puts a request that may not start into its peer's backlog; false when the backlogs would pass
  // max_backlog_bytes (the caller refuses it: overloaded).
  bool defer(WaitingRequest request);
  // A request of `from` finished.
  void finished(WorkerId from);
  // A serving request of `from` is about to wait on something else than this node's work: it
  // stops counting as serving (its fiber may then let a waiting request start). False, and it
  // stays counted, when `from` already has max_parked_per_peer parked.
  bool park(WorkerId from);
  // A parked request of `from` finished.
  void finished_parked(WorkerId from);
  // The next waiting request that may start now (counted as serving), the peers taking turns.
  std::optional<WaitingRequest> next();

  size_t serving() const { return serving_; }
  size_t serving_for(WorkerId peer) const;
  size_t waiting() const { return waiting_; }
  size_t backlog_bytes() const { return backlog_bytes_; }
  size_t parked() const { return parked_; }
  // Nothing serving, parked or waiting (a draining agent waits for this).
  bool idle() const { return serving_ == 0 && parked_ == 0 && waiting_ == 0; }
  const AdmissionLimits& limits() const { return limits_; }

 private:
  bool has_room(WorkerId from) const;

  AdmissionLimits limits_;
  size_t serving_ = 0;
  size_t waiting_ = 0;
  size_t backlog_bytes_ = 0;
  std::map<WorkerId, size_t> serving_by_peer_;
  size_t parked_ = 0;
  std::map<WorkerId, size_t> parked_by_peer_;
  std::map<WorkerId, std::deque<WaitingRequest>> backlog_;  // only peers with requests waiting
  WorkerId turn_ = 0;  // next() looks at this peer first, then the ones after it
};

}  // namespace dagsim::rpc
