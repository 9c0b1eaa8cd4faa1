// FileStore: a store.h Store whose keys live in one file, so that every process on a host (or on
// hosts sharing a filesystem whose flock works) that opens the same path shares the keys: the
// store of c10d's `store_type file`, in the role of PyTorch's FileStore
// (c10d_rendezvous_backend.py's _create_file_store; docs/elastic_parity.md).
//
// The file is dagsim's own format, not PyTorch's: a dagsim FileStore and a PyTorch one cannot share
// a file. It holds the whole table (file_store_format.h: the layout and its bounds, 512 MiB a
// file). Every call locks the file (flock: shared to read, exclusive to change), reads it whole
// (in pieces, never more than the bound: a sparse or growing file costs no more) and, for a
// change, writes it whole before unlocking, so each call is atomic across processes and the file
// is never seen half written. Versions rise with every change to any key (a key's version is the
// one its last change got; 0 is absent), so compare_set_version and watch work across processes
// as on the built-in store; they never wrap (a file whose last version is 2^64-1 takes no change).
//
// Waiting calls (get, wait, multi_get, watch) poll the file every kPollInterval on the caller's
// Clock until timeout() (PyTorch's FileStore default, 300 s, unless set); watch_at_most until its
// own bound. PyTorch's rules otherwise: compare_set on an absent key writes only when `expected`
// is empty and else answers `expected`; add reads the held text as std::stoll does and wraps
// (store_integer.h).
//
// Errors: a path that cannot be opened or created, or that is not a regular file (a FIFO, a
// device, a directory: never read, never waited on), is connection_failed naming it and why (at
// construction); an I/O failure later likewise; a file that is not this format, breaks a bound or
// whose lengths run past its end is protocol_error naming the path and the field; a change that
// would break a bound is invalid_argument; a wait that ends is timed_out naming the keys. Paths
// and keys in messages are printable() (the file's author chooses its keys).
//
// Threading: one fiber at a time per object (calls block the thread only while the file is
// locked: microseconds). Several objects, in any processes, may share one path.
#pragma once

#include <map>
#include <string>

#include "core/runtime/clock.h"
#include "core/store/store.h"
#include "net/file_store_format.h"

namespace dagsim::net {

class FileStore final : public store::Store {
 public:
  static constexpr runtime::Duration kPollInterval = std::chrono::milliseconds(10);
  static constexpr runtime::Duration kDefaultTimeout = std::chrono::seconds(300);  // PyTorch's FileStore

  FileStore(std::string path, runtime::Clock& clock);
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  const std::string& path() const { return path_; }

  void set(const std::string& key, store::Bytes value) override;
  store::Bytes get(const std::string& key) override;
  store::Bytes compare_set(const std::string& key, const store::Bytes& expected, store::Bytes desired) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  std::vector<store::Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, std::vector<store::Bytes> values) override;
  store::Versioned get_versioned(const std::string& key) override;
  store::CasOutcome compare_set_version(const std::string& key, uint64_t expected_version, store::Bytes desired) override;
  store::Versioned watch(const std::string& key, uint64_t known_version) override;
  store::Versioned watch_at_most(const std::string& key, uint64_t known_version, runtime::Duration timeout) override;

 private:
  using Table = FileStoreTable;
  class Lock;
  Table load(const Lock& lock) const;
  void save(const Lock& lock, const Table& table) const;
  Table read();
  // Runs `change` on the table under the exclusive lock and writes the table back.
  template <typename F>
  auto modify(F change);
  // Polls until `ready(table)` holds, until `deadline`; false when it passed first.
  template <typename F>
  bool poll_until(F ready, runtime::TimePoint deadline);
  [[noreturn]] void io_failed(const std::string& what) const;

  std::string path_;
  runtime::Clock& clock_;
  int fd_ = -1;
};

}  // namespace dagsim::net
