// ChunkedSortedMap and ChunkedSortedSet: the rendezvous state's node lists, sorted, held as a run
// of chunks that copies of a state share until one of them writes (copy on write), with the part
// of std::map's and std::set's interface the protocol, its checkers and its tests use (find,
// contains, count, at, operator[], emplace, insert, erase by key, ordered iteration).
//
// Why (issue 53 item 3): every node of a simulated cluster holds the version of the state it last
// read, and at N nodes those are up to N versions of N entries: O(N^2) memory, 30 GB projected at
// 10,000 nodes with one sorted vector per list. Consecutive versions differ in a node or two, so
// with chunks a copy costs a pointer per chunk and a change one chunk, and assign_sorted() (what
// decode() builds a list with) reuses every chunk of a base state whose elements it would repeat:
// a version costs O(N / kChunkTarget + changes), not O(N).
//
// Promises: iteration is in strictly increasing key order with no repeats, as std::map's and
// std::set's (the canonical encoding depends on it); every mutation keeps that order. Sharing is
// invisible: a chunk is written only while one container holds it, so a copy never sees another's
// change. No chunk is empty, and none holds more than 2 * kChunkTarget elements. An insertion or
// erasure invalidates iterators and references (a vector's rules), and so does any non-const
// access (begin(), find(), at(), operator[]), which may unshare chunks to hand out references.
// Not safe for two threads writing one container; copies may live on different threads (the
// shared chunks are only read, and shared_ptr counts atomically).
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/base/assert.h"

namespace dagsim::rendezvous {

// Elements a chunk is cut to when a list is built fresh; a chunk that grows past twice this is
// split. 64 entries of a node list are about 4 KB: a change copies that much, a copy 1/64 of a list.
inline constexpr size_t kChunkTarget = 64;

namespace chunked_detail {

// The sorted run of chunks both containers are made of. KeyOf maps an element to its key.
template <typename T, typename KeyOf>
class Chunks {
 public:
  using Chunk = std::vector<T>;
  using Key = std::remove_cvref_t<decltype(KeyOf{}(std::declval<const T&>()))>;

  template <bool Const>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using reference = std::conditional_t<Const, const T&, T&>;
    using pointer = std::conditional_t<Const, const T*, T*>;

    Iter() = default;
    Iter(const std::vector<std::shared_ptr<Chunk>>* chunks, size_t chunk, size_t index)
        : chunks_(chunks), chunk_(chunk), index_(index) {}
    operator Iter<true>() const  // NOLINT: implicit, as a vector's iterator converts
      requires(!Const)
    {
      return Iter<true>(chunks_, chunk_, index_);
    }

    reference operator*() const { return (*(*chunks_)[chunk_])[index_]; }
    pointer operator->() const { return &**this; }
    Iter& operator++() {
      if (++index_ == (*chunks_)[chunk_]->size()) {
        ++chunk_;
        index_ = 0;
      }
      return *this;
    }
    Iter operator++(int) {
      Iter before = *this;
      ++*this;
      return before;
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.chunk_ == b.chunk_ && a.index_ == b.index_; }

   private:
    const std::vector<std::shared_ptr<Chunk>>* chunks_ = nullptr;
    size_t chunk_ = 0;
    size_t index_ = 0;
  };
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;

  const_iterator begin() const { return {&chunks_, 0, 0}; }
  const_iterator end() const { return {&chunks_, chunks_.size(), 0}; }
  // Hands out writable references: every shared chunk is copied first.
  iterator begin_writable() {
    for (size_t c = 0; c < chunks_.size(); ++c) unshare(c);
    return {&chunks_, 0, 0};
  }
  iterator end_writable() { return {&chunks_, chunks_.size(), 0}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    chunks_.clear();
    size_ = 0;
  }

  // Where `key` is or would go: (chunk, index), (chunks_.size(), 0) past every element.
  std::pair<size_t, size_t> lower(const Key& key) const {
    // The first chunk whose last key is not below `key` holds the lower bound.
    const auto chunk = std::partition_point(chunks_.begin(), chunks_.end(), [&](const std::shared_ptr<Chunk>& c) {
      return KeyOf{}(c->back()) < key;
    });
    if (chunk == chunks_.end()) return {chunks_.size(), 0};
    const auto at = std::partition_point((*chunk)->begin(), (*chunk)->end(),
                                         [&](const T& item) { return KeyOf{}(item) < key; });
    return {static_cast<size_t>(chunk - chunks_.begin()), static_cast<size_t>(at - (*chunk)->begin())};
  }
  const_iterator find(const Key& key) const {
    const auto [c, i] = lower(key);
    if (c == chunks_.size() || !(KeyOf{}((*chunks_[c])[i]) == key)) return end();
    return {&chunks_, c, i};
  }
  iterator find_writable(const Key& key) {
    const auto [c, i] = lower(key);
    if (c == chunks_.size() || !(KeyOf{}((*chunks_[c])[i]) == key)) return end_writable();
    unshare(c);
    return {&chunks_, c, i};
  }

  // Inserts `item` unless its key is there; returns where it is and whether it was added.
  template <typename U>
  std::pair<iterator, bool> insert(U&& item) {
    if (chunks_.empty()) {
      chunks_.push_back(std::make_shared<Chunk>());
      chunks_.back()->reserve(kChunkTarget);
      chunks_.back()->push_back(std::forward<U>(item));
      size_ = 1;
      return {iterator(&chunks_, 0, 0), true};
    }
    auto [c, i] = lower(KeyOf{}(item));
    if (c == chunks_.size()) {
      // Past every element: the decoder's and the tests' appends land here.
      c = chunks_.size() - 1;
      i = chunks_[c]->size();
    } else if (KeyOf{}((*chunks_[c])[i]) == KeyOf{}(item)) {
      unshare(c);
      return {iterator(&chunks_, c, i), false};
    }
    unshare(c);
    Chunk& chunk = *chunks_[c];
    chunk.insert(chunk.begin() + static_cast<std::ptrdiff_t>(i), std::forward<U>(item));
    ++size_;
    if (chunk.size() > 2 * kChunkTarget) {
      // Split in halves: the new element lands in one of them.
      const size_t half = chunk.size() / 2;
      auto upper = std::make_shared<Chunk>(std::make_move_iterator(chunk.begin() + static_cast<std::ptrdiff_t>(half)),
                                           std::make_move_iterator(chunk.end()));
      chunk.resize(half);
      chunks_.insert(chunks_.begin() + static_cast<std::ptrdiff_t>(c) + 1, std::move(upper));
      if (i >= half) {
        ++c;
        i -= half;
      }
    }
    return {iterator(&chunks_, c, i), true};
  }

  size_t erase(const Key& key) {
    const auto [c, i] = lower(key);
    if (c == chunks_.size() || !(KeyOf{}((*chunks_[c])[i]) == key)) return 0;
    unshare(c);
    chunks_[c]->erase(chunks_[c]->begin() + static_cast<std::ptrdiff_t>(i));
    if (chunks_[c]->empty()) chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(c));
    --size_;
    return 1;
  }

  // Replaces the contents with `items`, which must be in strictly increasing key order (decode()
  // checks that before it calls this). With a base, the elements are cut where the base's chunks
  // begin, and every piece equal to the base's chunk there is that chunk, shared.
  void assign_sorted(std::vector<T>&& items, const Chunks* base) {
    clear();
    size_ = items.size();
    size_t from = 0;
    if (base != nullptr && base != this) {
      for (size_t j = 0; j < base->chunks_.size() && from < items.size(); ++j) {
        size_t to = items.size();
        if (j + 1 < base->chunks_.size()) {
          const Key& next = KeyOf{}(base->chunks_[j + 1]->front());
          to = static_cast<size_t>(std::partition_point(items.begin() + static_cast<std::ptrdiff_t>(from), items.end(),
                                                        [&](const T& item) { return KeyOf{}(item) < next; }) -
                                   items.begin());
        }
        const Chunk& theirs = *base->chunks_[j];
        if (to - from == theirs.size() &&
            std::equal(theirs.begin(), theirs.end(), items.begin() + static_cast<std::ptrdiff_t>(from))) {
          chunks_.push_back(base->chunks_[j]);
          ++shared_on_assign_;
        } else {
          append_fresh(items, from, to);
        }
        from = to;
      }
    }
    append_fresh(items, from, items.size());
    DAGSIM_ASSERT(size_ == items.size());
  }

  // How many chunks assign_sorted() took from its bases, over this container's life (tests).
  size_t shared_on_assign() const { return shared_on_assign_; }
  size_t chunk_count() const { return chunks_.size(); }
  // Whether chunk `c` is shared with another container (tests).
  bool chunk_shared(size_t c) const { return chunks_[c].use_count() > 1; }

  friend bool operator==(const Chunks& a, const Chunks& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void unshare(size_t c) {
    if (chunks_[c].use_count() != 1) chunks_[c] = std::make_shared<Chunk>(*chunks_[c]);
  }
  // items[from, to) as fresh chunks of kChunkTarget (the last up to twice that).
  void append_fresh(std::vector<T>& items, size_t from, size_t to) {
    while (from < to) {
      const size_t n = to - from <= 2 * kChunkTarget ? to - from : kChunkTarget;
      const auto first = items.begin() + static_cast<std::ptrdiff_t>(from);
      chunks_.push_back(std::make_shared<Chunk>(std::make_move_iterator(first),
                                                std::make_move_iterator(first + static_cast<std::ptrdiff_t>(n))));
      from += n;
    }
  }

  // Never empty chunks; shared between copies, written only where use_count() is 1.
  std::vector<std::shared_ptr<Chunk>> chunks_;
  size_t size_ = 0;
  size_t shared_on_assign_ = 0;
};

struct FirstOf {
  template <typename P>
  const auto& operator()(const P& pair) const {
    return pair.first;
  }
};
struct Itself {
  template <typename K>
  const K& operator()(const K& key) const {
    return key;
  }
};

}  // namespace chunked_detail

template <typename K, typename V>
class ChunkedSortedMap {
  using Base = chunked_detail::Chunks<std::pair<K, V>, chunked_detail::FirstOf>;

 public:
  using value_type = std::pair<K, V>;
  using iterator = typename Base::iterator;
  using const_iterator = typename Base::const_iterator;

  ChunkedSortedMap() = default;
  ChunkedSortedMap(std::initializer_list<value_type> items) {
    for (const value_type& item : items) emplace(item.first, item.second);
  }
  // From any map-like range (std::map, a vector of pairs): later repeats of a key are dropped,
  // as std::map's range constructor drops them.
  template <typename Range>
    requires(!std::is_same_v<std::remove_cvref_t<Range>, ChunkedSortedMap>)
  ChunkedSortedMap(const Range& items) {  // NOLINT: implicit, as a std::map assigned to the field
    for (const auto& [k, v] : items) emplace(k, v);
  }

  iterator begin() { return chunks_.begin_writable(); }
  iterator end() { return chunks_.end_writable(); }
  const_iterator begin() const { return chunks_.begin(); }
  const_iterator end() const { return chunks_.end(); }
  size_t size() const { return chunks_.size(); }
  bool empty() const { return chunks_.empty(); }
  void clear() { chunks_.clear(); }

  iterator find(const K& key) { return chunks_.find_writable(key); }
  const_iterator find(const K& key) const { return chunks_.find(key); }
  bool contains(const K& key) const { return chunks_.find(key) != chunks_.end(); }
  size_t count(const K& key) const { return contains(key) ? 1 : 0; }
  V& at(const K& key) {
    const iterator it = find(key);
    DAGSIM_ASSERT_MSG(it != end(), "ChunkedSortedMap::at: no such key");
    return it->second;
  }
  const V& at(const K& key) const {
    const const_iterator it = find(key);
    DAGSIM_ASSERT_MSG(it != end(), "ChunkedSortedMap::at: no such key");
    return it->second;
  }
  V& operator[](const K& key) { return emplace(key, V{}).first->second; }

  // Inserts (key, value) unless the key is there; returns where it is and whether it was added.
  template <typename KK, typename VV>
  std::pair<iterator, bool> emplace(KK&& key, VV&& value) {
    return chunks_.insert(value_type(std::forward<KK>(key), std::forward<VV>(value)));
  }
  template <typename KK, typename VV>
  iterator emplace_hint(const_iterator, KK&& key, VV&& value) {
    return emplace(std::forward<KK>(key), std::forward<VV>(value)).first;
  }
  size_t erase(const K& key) { return chunks_.erase(key); }

  // See Chunks::assign_sorted: `items` strictly increasing by key; equal pieces of `base` shared.
  void assign_sorted(std::vector<value_type>&& items, const ChunkedSortedMap* base) {
    chunks_.assign_sorted(std::move(items), base == nullptr ? nullptr : &base->chunks_);
  }
  const Base& chunks() const { return chunks_; }

  friend bool operator==(const ChunkedSortedMap& a, const ChunkedSortedMap& b) { return a.chunks_ == b.chunks_; }
  // Against a std::map (tests compare with map literals): the same keys and values in order.
  template <typename Map>
    requires(!std::is_same_v<Map, ChunkedSortedMap>)
  friend bool operator==(const ChunkedSortedMap& a, const Map& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const auto& x, const auto& y) { return x.first == y.first && x.second == y.second; });
  }

 private:
  Base chunks_;
};

template <typename K>
class ChunkedSortedSet {
  using Base = chunked_detail::Chunks<K, chunked_detail::Itself>;

 public:
  using value_type = K;
  using iterator = typename Base::const_iterator;  // keys are never changed in place
  using const_iterator = iterator;

  ChunkedSortedSet() = default;
  ChunkedSortedSet(std::initializer_list<K> items) {
    for (const K& item : items) insert(item);
  }
  // From any range of keys (a std::set): repeats are dropped.
  template <typename Range>
    requires(!std::is_same_v<std::remove_cvref_t<Range>, ChunkedSortedSet>)
  ChunkedSortedSet(const Range& items) {  // NOLINT: implicit, as a std::set assigned to the field
    for (const K& item : items) insert(item);
  }

  iterator begin() const { return chunks_.begin(); }
  iterator end() const { return chunks_.end(); }
  size_t size() const { return chunks_.size(); }
  bool empty() const { return chunks_.empty(); }
  void clear() { chunks_.clear(); }

  iterator find(const K& key) const { return chunks_.find(key); }
  bool contains(const K& key) const { return find(key) != end(); }
  size_t count(const K& key) const { return contains(key) ? 1 : 0; }

  template <typename KK>
  std::pair<iterator, bool> insert(KK&& key) {
    auto [it, added] = chunks_.insert(K(std::forward<KK>(key)));
    return {it, added};
  }
  template <typename KK>
  std::pair<iterator, bool> emplace(KK&& key) {
    return insert(std::forward<KK>(key));
  }
  template <typename KK>
  iterator emplace_hint(const_iterator, KK&& key) {
    return insert(std::forward<KK>(key)).first;
  }
  size_t erase(const K& key) { return chunks_.erase(key); }

  void assign_sorted(std::vector<K>&& items, const ChunkedSortedSet* base) {
    chunks_.assign_sorted(std::move(items), base == nullptr ? nullptr : &base->chunks_);
  }
  const Base& chunks() const { return chunks_; }

  friend bool operator==(const ChunkedSortedSet& a, const ChunkedSortedSet& b) { return a.chunks_ == b.chunks_; }
  // Against a std::set (tests compare with set literals): the same keys in order.
  template <typename Set>
    requires(!std::is_same_v<Set, ChunkedSortedSet>)
  friend bool operator==(const ChunkedSortedSet& a, const Set& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  Base chunks_;
};

}  // namespace dagsim::rendezvous
