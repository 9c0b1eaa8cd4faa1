#include "core/store/key_value_table.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/base/printable.h"
#include "core/store/store_integer.h"
#include "core/store/store_wait.h"
#include "core/store/value_delta.h"

namespace dagsim::store {

void KeyValueTable::change(const std::string& key, std::optional<Bytes> after) {
  // Observers need the value before; nobody else does, so it is copied only for them.
  std::optional<Bytes> before;
  uint64_t version = 0;
  {
    runtime::FiberLock lock(mutex_);
    const uint64_t revision_before = revision_;
    const auto it = data_.find(key);
    if (!observers_.empty() && it != data_.end()) before = it->second.value;
    if (after) {
      Entry& e = it != data_.end() ? it->second : data_[key];
      const uint64_t version_before = e.version;  // 0 for a new key
      if (it != data_.end()) remember(key, e);
      e.value = *after;
      e.version = ++revision_;
      version = e.version;
      // Written: a key's version only grows (store.h, "Versions"), so a version names one value.
      DAGSIM_ASSERT(version > version_before);
    } else {
      if (it == data_.end()) return;
      data_.erase(it);
      history_.erase(key);
      ++revision_;
    }
    // Every write raises the store-wide revision by exactly one, and it never wraps.
    DAGSIM_ASSERT_EQ(revision_, revision_before + 1);
    changed_.notify_all();
    if (const auto w = watchers_.find(key); w != watchers_.end()) w->second.moved.notify_all();
  }
  if (observers_.empty()) return;
  const KeyChange c{key, before, after, version};
  // An observer may unobserve (itself or another) while being told: walk ids, not iterators.
  for (uint64_t id = 0;;) {
    const auto it = observers_.upper_bound(id);
    if (it == observers_.end()) break;
    id = it->first;
    Observer observer = it->second;
    observer(c);
  }
}

void KeyValueTable::remember(const std::string& key, Entry& entry) {
  if (entry.value.size() < kMinDeltaBytes) {
    // A small value breaks the chain: older versions could only be told whole anyway.
    history_.erase(key);
    return;
  }
  History& h = history_[key];
  // The history's versions rise along the deque (value_at's binary search relies on it).
  if (!h.values.empty()) DAGSIM_ASSERT(h.values.back().version < entry.version);
  DAGSIM_ASSERT(entry.version != 0);
  h.bytes += entry.value.size();
  h.values.push_back(Past{entry.version, std::move(entry.value)});
  while (h.values.size() > kHistoryVersions || h.bytes > kHistoryBytesPerKey) {
    DAGSIM_PROBE("store.history_dropped_oldest_value");
    DAGSIM_ASSERT(h.bytes >= h.values.front().value.size());
    h.bytes -= h.values.front().value.size();
    h.values.pop_front();
  }
}

const Bytes* KeyValueTable::value_at(const std::string& key, uint64_t version) const {
  const auto it = data_.find(key);
  if (it == data_.end() || version == 0) return nullptr;
  if (it->second.version == version) return &it->second.value;
  const auto h = history_.find(key);
  if (h == history_.end()) return nullptr;
  // Versions rise along the deque: binary search.
  const auto past = std::lower_bound(h->second.values.begin(), h->second.values.end(), version,
                                     [](const Past& p, uint64_t v) { return p.version < v; });
  if (past == h->second.values.end() || past->version != version) return nullptr;
  // Read back: a past value is older than the key's current one.
  DAGSIM_ASSERT(past->version < it->second.version);
  return &past->value;
}

void KeyValueTable::set(const std::string& key, Bytes value) {
  const uint64_t revision_before = revision_;
  change(key, std::move(value));
  DAGSIM_ASSERT(version_of(key) > revision_before);  // a set always writes
}

std::optional<Bytes> KeyValueTable::get(const std::string& key) const {
  const auto it = data_.find(key);
  if (it == data_.end()) return std::nullopt;
  return it->second.value;
}

Bytes KeyValueTable::compare_set(const std::string& key, const Bytes& expected, Bytes desired) {
  const auto it = data_.find(key);
  // Absent: written only if `expected` is empty; otherwise PyTorch answers `expected` back.
  if (it == data_.end() && !expected.empty()) return expected;
  if (it != data_.end() && it->second.value != expected) {
    DAGSIM_PROBE("store.compare_set_value_mismatch");
    return it->second.value;
  }
  change(key, desired);
  return desired;
}

int64_t KeyValueTable::add(const std::string& key, int64_t delta) {
  const auto it = data_.find(key);
  const int64_t sum = wrapping_add(it == data_.end() ? 0 : stored_integer(key, it->second.value), delta);
  const std::string text = std::to_string(sum);
  change(key, Bytes(text.begin(), text.end()));
  return sum;
}

bool KeyValueTable::all_present(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys) {
    if (!data_.contains(k)) return false;
  }
  return true;
}

bool KeyValueTable::check(const std::vector<std::string>& keys) const { return all_present(keys); }

bool KeyValueTable::erase(const std::string& key) {
  if (!data_.contains(key)) return false;
  change(key, std::nullopt);
  return true;
}

void KeyValueTable::multi_set(const std::vector<std::string>& keys, std::vector<Bytes> values) {
  if (keys.size() != values.size()) throw errors::invalid_argument("store multi_set: as many values as keys are needed");
  for (size_t i = 0; i < keys.size(); ++i) change(keys[i], std::move(values[i]));
}

std::vector<std::string> KeyValueTable::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> absent;
  for (const std::string& k : keys) {
    if (!data_.contains(k)) absent.push_back(k);
  }
  return absent;
}

Versioned KeyValueTable::get_versioned(const std::string& key) const {
  const auto it = data_.find(key);
  if (it == data_.end()) return {};
  // Read: a present key has a version, and none is newer than the store's revision.
  DAGSIM_ASSERT(it->second.version != 0);
  DAGSIM_ASSERT(it->second.version <= revision_);
  return {it->second.value, it->second.version};
}

uint64_t KeyValueTable::version_of(const std::string& key) const {
  const auto it = data_.find(key);
  if (it == data_.end()) return 0;
  DAGSIM_ASSERT(it->second.version != 0);
  DAGSIM_ASSERT(it->second.version <= revision_);
  return it->second.version;
}

std::optional<uint64_t> KeyValueTable::compare_set_version(const std::string& key, uint64_t expected_version,
                                                           Bytes desired) {
  if (version_of(key) != expected_version) {
    DAGSIM_PROBE("store.cas_version_lost_race");
    return std::nullopt;
  }
  change(key, std::move(desired));
  const uint64_t written = version_of(key);
  // The token it was written against is now in the past: the new version is larger, the newest.
  DAGSIM_ASSERT(written > expected_version);
  DAGSIM_ASSERT_EQ(written, revision_);
  return written;
}

bool KeyValueTable::wait_for_keys(const std::vector<std::string>& keys, std::optional<runtime::TimePoint> deadline,
                                  const std::function<bool()>& abandon) {
  runtime::FiberLock lock(mutex_);
  bool given_up = false;
  WaitState state = WaitState::pending;
  const bool ready = runtime::block_until(
      changed_, lock,
      [&] {
        if (all_present(keys)) return true;
        given_up = abandon && abandon();
        return given_up;
      },
      deadline, "store.wait");
  // Read under the lock block_until returns with: what the wait's end means holds now.
  const WaitFacts facts{all_present(keys), deadline.has_value(), given_up};
  if (!ready) DAGSIM_PROBE("store.wait_timed_out");
  if (ready && given_up) DAGSIM_PROBE("store.wait_abandoned");
  transition(state, !ready ? WaitState::timed_out : given_up ? WaitState::cancelled : WaitState::satisfied, facts);
  return state == WaitState::satisfied;
}

bool KeyValueTable::wait_for_change(const std::string& key, uint64_t known_version, runtime::TimePoint deadline) {
  runtime::FiberLock lock(mutex_);
  auto version = [&] {
    const auto it = data_.find(key);
    return it == data_.end() ? uint64_t{0} : it->second.version;
  };
  WaitState state = WaitState::pending;
  // Registered for the wait only (a kill or cancellation unwinds through the guard).
  const auto entry = watchers_.try_emplace(key).first;
  ++entry->second.waiting;
  struct Unregister {
    std::map<std::string, KeyWatchers>& watchers;
    std::map<std::string, KeyWatchers>::iterator entry;
    ~Unregister() {
      DAGSIM_ASSERT(entry->second.waiting > 0);
      if (--entry->second.waiting == 0) watchers.erase(entry);
    }
  } unregister{watchers_, entry};
  const bool moved =
      runtime::block_until(entry->second.moved, lock, [&] { return version() != known_version; }, deadline, "store.watch");
  if (!moved) DAGSIM_PROBE("store.watch_timed_out");
  transition(state, moved ? WaitState::satisfied : WaitState::timed_out,
             WaitFacts{version() != known_version, true, false});
  // Read: whatever version the waiter is answered with, none is newer than the store's revision.
  DAGSIM_ASSERT(version() <= revision_);
  return moved;
}

void KeyValueTable::wake_all() {
  runtime::FiberLock lock(mutex_);
  changed_.notify_all();
}

uint64_t KeyValueTable::observe(Observer observer) {
  const uint64_t id = next_observer_++;
  observers_.emplace(id, std::move(observer));
  return id;
}

void KeyValueTable::unobserve(uint64_t id) { observers_.erase(id); }

}  // namespace dagsim::store
