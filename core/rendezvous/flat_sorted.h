// FlatSortedMap and FlatSortedSet: the rendezvous state's node lists as one sorted vector each,
// with the part of std::map's and std::set's interface the protocol, its checkers and its tests
// use (find, contains, count, at, operator[], emplace, insert, erase by key, ordered iteration).
//
// Why: at 1,000 nodes every sync copied, decoded and freed std::map/std::set states, one heap
// node per entry (issue 53 item 3); a sorted vector is one allocation, a copy is one allocation
// and a pass over the elements, and decode() appends in order without searching.
//
// Promises: iteration is in strictly increasing key order with no repeats, as std::map's and
// std::set's (the canonical encoding depends on it); every mutation keeps that order. Unlike
// std::map, an insertion or erasure invalidates iterators and references (a vector's rules).
// emplace_hint() ignores its hint unless it is end() and the key sorts after every element (the
// decoder's append), where it is O(1); any other insertion or erasure is O(n).
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/base/assert.h"

namespace dagsim::rendezvous {

template <typename K, typename V>
class FlatSortedMap {
 public:
  using value_type = std::pair<K, V>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  FlatSortedMap() = default;
  FlatSortedMap(std::initializer_list<value_type> items) {
    for (const value_type& item : items) emplace(item.first, item.second);
  }
  // From any map-like range (std::map, a vector of pairs): later repeats of a key are dropped,
  // as std::map's range constructor drops them.
  template <typename Range>
    requires(!std::is_same_v<std::remove_cvref_t<Range>, FlatSortedMap>)
  FlatSortedMap(const Range& items) {  // NOLINT: implicit, as a std::map assigned to the field
    for (const auto& [k, v] : items) emplace(k, v);
  }

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }
  void reserve(size_t n) { items_.reserve(n); }

  iterator find(const K& key) {
    const iterator it = lower(key);
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  const_iterator find(const K& key) const {
    const const_iterator it = lower(key);
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  bool contains(const K& key) const { return find(key) != end(); }
  size_t count(const K& key) const { return contains(key) ? 1 : 0; }
  V& at(const K& key) {
    const iterator it = find(key);
    DAGSIM_ASSERT_MSG(it != items_.end(), "FlatSortedMap::at: no such key");
    return it->second;
  }
  const V& at(const K& key) const {
    const const_iterator it = find(key);
    DAGSIM_ASSERT_MSG(it != items_.end(), "FlatSortedMap::at: no such key");
    return it->second;
  }
  V& operator[](const K& key) { return emplace(key, V{}).first->second; }

  // Inserts (key, value) unless the key is there; returns where it is and whether it was added.
  template <typename KK, typename VV>
  std::pair<iterator, bool> emplace(KK&& key, VV&& value) {
    if (items_.empty() || items_.back().first < key) {
      items_.emplace_back(std::forward<KK>(key), std::forward<VV>(value));
      return {std::prev(items_.end()), true};
    }
    iterator it = lower(key);
    if (it != items_.end() && it->first == key) return {it, false};
    it = items_.emplace(it, std::forward<KK>(key), std::forward<VV>(value));
    return {it, true};
  }
  template <typename KK, typename VV>
  iterator emplace_hint(const_iterator, KK&& key, VV&& value) {
    return emplace(std::forward<KK>(key), std::forward<VV>(value)).first;
  }
  size_t erase(const K& key) {
    const iterator it = find(key);
    if (it == items_.end()) return 0;
    items_.erase(it);
    return 1;
  }

  friend bool operator==(const FlatSortedMap&, const FlatSortedMap&) = default;
  // Against a std::map (tests compare with map literals): the same keys and values in order.
  template <typename Map>
    requires(!std::is_same_v<Map, FlatSortedMap>)
  friend bool operator==(const FlatSortedMap& a, const Map& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const auto& x, const auto& y) { return x.first == y.first && x.second == y.second; });
  }

 private:
  iterator lower(const K& key) {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const value_type& item, const K& k) { return item.first < k; });
  }
  const_iterator lower(const K& key) const {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const value_type& item, const K& k) { return item.first < k; });
  }

  std::vector<value_type> items_;
};

template <typename K>
class FlatSortedSet {
 public:
  using value_type = K;
  using iterator = typename std::vector<K>::const_iterator;  // keys are never changed in place
  using const_iterator = iterator;

  FlatSortedSet() = default;
  FlatSortedSet(std::initializer_list<K> items) {
    for (const K& item : items) insert(item);
  }
  // From any range of keys (a std::set): repeats are dropped.
  template <typename Range>
    requires(!std::is_same_v<std::remove_cvref_t<Range>, FlatSortedSet>)
  FlatSortedSet(const Range& items) {  // NOLINT: implicit, as a std::set assigned to the field
    for (const K& item : items) insert(item);
  }

  iterator begin() const { return items_.begin(); }
  iterator end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }
  void reserve(size_t n) { items_.reserve(n); }

  iterator find(const K& key) const {
    const iterator it = std::lower_bound(items_.begin(), items_.end(), key);
    return it != items_.end() && *it == key ? it : items_.end();
  }
  bool contains(const K& key) const { return find(key) != end(); }
  size_t count(const K& key) const { return contains(key) ? 1 : 0; }

  template <typename KK>
  std::pair<iterator, bool> insert(KK&& key) {
    if (items_.empty() || items_.back() < key) {
      items_.push_back(std::forward<KK>(key));
      return {std::prev(items_.end()), true};
    }
    auto it = std::lower_bound(items_.begin(), items_.end(), key);
    if (it != items_.end() && *it == key) return {it, false};
    return {items_.insert(it, std::forward<KK>(key)), true};
  }
  template <typename KK>
  std::pair<iterator, bool> emplace(KK&& key) {
    return insert(std::forward<KK>(key));
  }
  template <typename KK>
  iterator emplace_hint(const_iterator, KK&& key) {
    return insert(std::forward<KK>(key)).first;
  }
  size_t erase(const K& key) {
    const iterator it = find(key);
    if (it == items_.end()) return 0;
    items_.erase(it);
    return 1;
  }

  friend bool operator==(const FlatSortedSet&, const FlatSortedSet&) = default;
  // Against a std::set (tests compare with set literals): the same keys in order.
  template <typename Set>
    requires(!std::is_same_v<Set, FlatSortedSet>)
  friend bool operator==(const FlatSortedSet& a, const Set& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::vector<K> items_;
};

}  // namespace dagsim::rendezvous
