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

namespace {
// One of `from`'s counted requests ends: the total and the peer's count go down by one (a peer at
// zero leaves the map). Each request is counted once and released once.
void release(size_t& total, std::map<WorkerId, size_t>& by_peer, WorkerId from) {
  const auto it = by_peer.find(from);
  DAGSIM_ASSERT(total > 0 && it != by_peer.end() && it->second > 0);
  --total;
  if (--it->second == 0) by_peer.erase(it);
}
}  // namespace

void RequestAdmission::finished(WorkerId from) { release(serving_, serving_by_peer_, from); }

bool RequestAdmission::park(WorkerId from) {
  const auto it = parked_by_peer_.find(from);
  if ((it == parked_by_peer_.end() ? 0 : it->second) >= limits_.max_parked_per_peer) return false;
  release(serving_, serving_by_peer_, from);
  ++parked_by_peer_[from];
  ++parked_;
  return true;
}

void RequestAdmission::finished_parked(WorkerId from) { release(parked_, parked_by_peer_, from); }

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
