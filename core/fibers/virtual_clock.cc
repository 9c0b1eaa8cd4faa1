#include "core/fibers/virtual_clock.h"

#include <algorithm>

#include "core/base/assert.h"

namespace dagsim::fibers {

TimerId VirtualClock::call_at(TimePoint deadline, std::function<void()> fire) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    DAGSIM_ASSERT_MSG(slots_.size() < kSlotMask, "more than 16M timers armed at once");
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  const TimerId id = (++next_sequence_ << kSlotBits) | slot;
  slots_[slot].id = id;
  slots_[slot].fire = std::move(fire);
  const Entry entry{std::max(deadline, now_), id};
  if (run_empty() || entry.at >= run_.back().at) {
    run_.push_back(entry);  // ids only grow, so the run stays sorted
  } else {
    heap_.push_back(entry);
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  ++live_;
  return id;
}

void VirtualClock::cancel(TimerId id) {
  const uint64_t slot = id & kSlotMask;
  if (id == 0 || slot >= slots_.size() || slots_[slot].id != id) return;
  slots_[slot].id = 0;
  slots_[slot].fire = nullptr;
  free_slots_.push_back(static_cast<uint32_t>(slot));
  --live_;
  // Cancelled long timeouts would otherwise sit in the queue until their deadline.
  const size_t entries = heap_.size() + (run_.size() - run_head_);
  if (entries > 1024 && entries > 4 * live_) sweep();
}

void VirtualClock::sweep() {
  std::erase_if(heap_, [this](const Entry& e) { return stale(e); });
  std::make_heap(heap_.begin(), heap_.end(), later);
  run_.erase(run_.begin(), run_.begin() + static_cast<std::ptrdiff_t>(run_head_));
  run_head_ = 0;
  std::erase_if(run_, [this](const Entry& e) { return stale(e); });  // keeps the run's order
}

void VirtualClock::run_pop_front() {
  ++run_head_;
  if (run_head_ == run_.size()) {
    run_.clear();
    run_head_ = 0;
  } else if (run_head_ >= 1024 && 2 * run_head_ >= run_.size()) {
    run_.erase(run_.begin(), run_.begin() + static_cast<std::ptrdiff_t>(run_head_));
    run_head_ = 0;
  }
}

void VirtualClock::skip_stale() {
  while (!heap_.empty() && stale(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }
  while (!run_empty() && stale(run_[run_head_])) run_pop_front();
}

bool VirtualClock::next_in_run() const {
  if (heap_.empty()) return true;
  if (run_empty()) return false;
  return later(heap_.front(), run_[run_head_]);
}

TimePoint VirtualClock::next_deadline() {
  DAGSIM_ASSERT(live_ > 0);
  skip_stale();
  return next_in_run() ? run_[run_head_].at : heap_.front().at;
}

void VirtualClock::fire_next() {
  DAGSIM_ASSERT(live_ > 0);
  skip_stale();
  Entry top;
  if (next_in_run()) {
    top = run_[run_head_];
    run_pop_front();
  } else {
    top = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }
  DAGSIM_ASSERT(top.at >= now_);
  now_ = top.at;
  Slot& slot = slots_[top.id & kSlotMask];
  std::function<void()> fire = std::move(slot.fire);
  slot.id = 0;
  slot.fire = nullptr;
  free_slots_.push_back(static_cast<uint32_t>(top.id & kSlotMask));
  --live_;
  firing_ = top.id;
  fire();
  firing_ = 0;
}

void VirtualClock::advance_to(TimePoint t) {
  DAGSIM_ASSERT(t >= now_);
  DAGSIM_ASSERT(live_ == 0 || next_deadline() >= t);
  now_ = t;
}

}  // namespace dagsim::fibers
