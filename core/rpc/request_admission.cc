#include "core/rpc/request_admission.h"

#include "core/base/assert.h"

namespace dagsim::rpc {

RequestAdmission::RequestAdmission(AdmissionLimits limits) : limits_(limits) {
  DAGSIM_ASSERT_MSG(limits_.max_serving > 0 && limits_.max_serving_per_peer > 0, "a node serves at least one request");
}

size_t RequestAdmission::serving_for(WorkerId peer) const {
  const auto it = serving_by_peer_.find(peer);
  return it == serving_by_peer_.end() ? 0 : it->second;
}

bool RequestAdmission::has_room(WorkerId from) const {
  return serving_ < limits_.max_serving && serving_for(from) < limits_.max_serving_per_peer;
}

bool RequestAdmission::try_start(WorkerId from) {
  if (backlog_.count(from) != 0 || !has_room(from)) return false;
  ++serving_;
  ++serving_by_peer_[from];
  return true;
}

bool RequestAdmission::defer(WaitingRequest request) {
  if (backlog_bytes_ + request.bytes > limits_.max_backlog_bytes) return false;
  backlog_bytes_ += request.bytes;
  ++waiting_;
  backlog_[request.from].push_back(std::move(request));
  return true;
}

void RequestAdmission::finished(WorkerId from) {
  const auto it = serving_by_peer_.find(from);
  DAGSIM_ASSERT(serving_ > 0 && it != serving_by_peer_.end() && it->second > 0);  // started once, finished once
  --serving_;
  if (--it->second == 0) serving_by_peer_.erase(it);
}

bool RequestAdmission::park(WorkerId from) {
  size_t& parked_for = parked_by_peer_[from];
  if (parked_for >= limits_.max_parked_per_peer) {
    if (parked_for == 0) parked_by_peer_.erase(from);
    return false;
  }
  finished(from);
  ++parked_for;
  ++parked_;
  return true;
}

void RequestAdmission::finished_parked(WorkerId from) {
  const auto it = parked_by_peer_.find(from);
  DAGSIM_ASSERT(parked_ > 0 && it != parked_by_peer_.end() && it->second > 0);  // parked once, finished once
  --parked_;
  if (--it->second == 0) parked_by_peer_.erase(it);
}

std::optional<WaitingRequest> RequestAdmission::next() {
  if (backlog_.empty() || serving_ >= limits_.max_serving) return std::nullopt;
  // The first peer at or after turn_ with room, wrapping around: each peer in turn.
  auto it = backlog_.lower_bound(turn_);
  for (size_t looked = 0; looked < backlog_.size(); ++looked, ++it) {
    if (it == backlog_.end()) it = backlog_.begin();
    if (!has_room(it->first)) continue;
    WaitingRequest request = std::move(it->second.front());
    it->second.pop_front();
    DAGSIM_ASSERT(backlog_bytes_ >= request.bytes && waiting_ > 0);
    backlog_bytes_ -= request.bytes;
    --waiting_;
    const WorkerId peer = it->first;
    if (it->second.empty()) backlog_.erase(it);
    turn_ = static_cast<WorkerId>(peer + 1);  // wraps to 0 past the last id: lower_bound finds the first
    ++serving_;
    ++serving_by_peer_[peer];
    return request;
  }
  return std::nullopt;  // every peer with waiting requests is at its own limit
}

}  // namespace dagsim::rpc
