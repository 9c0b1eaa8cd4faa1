#include "core/fibers/virtual_clock.h"

#include <algorithm>

#include "core/base/assert.h"

namespace dagsim::fibers {

void VirtualClock::enqueue(Entry entry) {
  entry.at = std::max(entry.at, now_);
  if (run_empty() || entry.at >= run_.back().at) {
    run_.push_back(std::move(entry));  // ids only grow, so the run stays sorted
  } else {
    heap_.push_back(entry);
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  ++live_;
}

TimerId VirtualClock::take_slot(uint32_t& slot) {
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
  return id;
}

TimerId VirtualClock::call_at(TimePoint deadline, std::function<void()> fire) {
  uint32_t slot;
  const TimerId id = take_slot(slot);
  slots_[slot].fire = std::move(fire);
  enqueue(Entry{deadline, id});
  return id;
}

void VirtualClock::post_at(TimePoint deadline, RawAction action, void* context, uint64_t argument) {
  DAGSIM_ASSERT(action != nullptr);
  uint32_t slot;
  const TimerId id = take_slot(slot);
  Slot& s = slots_[slot];
  s.raw = action;
  s.context = context;
  s.argument = argument;
  enqueue(Entry{deadline, id});
}

void VirtualClock::cancel(TimerId id) {
  const uint64_t slot = id & kSlotMask;
  if (id == 0 || slot >= slots_.size() || slots_[slot].id != id) return;
  slots_[slot].id = 0;
  slots_[slot].raw = nullptr;
  slots_[slot].fire = nullptr;
  free_slots_.push_back(static_cast<uint32_t>(slot));
  --live_;
  // Cancelled long timeouts would otherwise sit in the queue until their deadline.
  const size_t entries = heap_.size() + run_.size();
  if (entries > 1024 && entries > 4 * live_) sweep();
}

void VirtualClock::sweep() {
  std::erase_if(heap_, [this](const Entry& e) { return stale(e); });
  std::make_heap(heap_.begin(), heap_.end(), later);
  // Round the ring once, keeping the live entries in their order.
  for (size_t n = run_.size(); n > 0; --n) {
    const Entry e = run_.front();
    run_.pop_front();
    if (!stale(e)) run_.push_back(Entry(e));
  }
}

void VirtualClock::skip_stale() {
  while (!heap_.empty() && stale(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }
  while (!run_empty() && stale(run_.front())) run_.pop_front();
}

bool VirtualClock::next_in_run() const {
  if (heap_.empty()) return true;
  if (run_empty()) return false;
  return later(heap_.front(), run_.front());
}

TimePoint VirtualClock::next_deadline() {
  DAGSIM_ASSERT(live_ > 0);
  skip_stale();
  return next_in_run() ? run_.front().at : heap_.front().at;
}

void VirtualClock::fire_next() {
  DAGSIM_ASSERT(live_ > 0);
  skip_stale();
  fire(pop_next());
}

bool VirtualClock::fire_next_at(TimePoint instant) {
  DAGSIM_ASSERT(instant >= now_);
  if (live_ == 0) return false;
  if (next_deadline() != instant) return false;  // next_deadline() skips the stale entries
  fire(pop_next());
  return true;
}

VirtualClock::Entry VirtualClock::pop_next() {
  Entry top;
  if (next_in_run()) {
    top = run_.front();
    run_.pop_front();
  } else {
    top = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }
  return top;
}

void VirtualClock::fire(const Entry& top) {
  DAGSIM_ASSERT(top.at >= now_);
  now_ = top.at;
  firing_ = top.id;
  --live_;
  const uint32_t index = static_cast<uint32_t>(top.id & kSlotMask);
  Slot& slot = slots_[index];
  slot.id = 0;
  free_slots_.push_back(index);
  if (slot.raw != nullptr) {
    // Copied out first: the action may arm timers, which may take this slot or grow slots_.
    const RawAction action = slot.raw;
    void* const context = slot.context;
    const uint64_t argument = slot.argument;
    slot.raw = nullptr;
    action(context, argument);
  } else {
    std::function<void()> fire = std::move(slot.fire);
    slot.fire = nullptr;
    fire();
  }
  firing_ = 0;
}

void VirtualClock::advance_to(TimePoint t) {
  DAGSIM_ASSERT(t >= now_);
  DAGSIM_ASSERT(live_ == 0 || next_deadline() >= t);
  now_ = t;
}

}  // namespace dagsim::fibers
