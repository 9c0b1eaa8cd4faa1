// FileStore (file_store.h).
#include "net/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/base/printable.h"
#include "core/rendezvous/rendezvous_settings.h"
#include "core/store/store_integer.h"

namespace dagsim::net {

namespace {

// How much of the file one read asks for: a file is read in pieces, so what it costs is what it
// holds, whatever its size claims.
constexpr size_t kReadChunk = size_t{1} << 20;

std::string keys_text(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) out += (i ? ", " : "") + printable(keys[i]);
  if (keys.size() > 4) out += " and " + std::to_string(keys.size() - 4) + " more";
  return out;
}

}  // namespace

// flock on the store's descriptor for one call; released however the call ends.
class FileStore::Lock {
 public:
  Lock(const FileStore& store, bool exclusive) : store_(store) {
    while (::flock(store.fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
      if (errno != EINTR) store.io_failed("cannot lock it");
    }
  }
  ~Lock() { (void)::flock(store_.fd_, LOCK_UN); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  const FileStore& store_;
};

FileStore::FileStore(std::string path, runtime::Clock& clock) : path_(std::move(path)), clock_(clock) {
  // O_NONBLOCK: opening a FIFO or a device must not wait on it (it is refused next).
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd_ < 0) throw errors::connection_failed("cannot open the " + file_store_name(path_) + ": " + std::strerror(errno));
  struct stat st{};
  const bool stated = ::fstat(fd_, &st) == 0;
  if (!stated || !S_ISREG(st.st_mode)) {
    const std::string why = !stated ? std::string(std::strerror(errno)) : "not a regular file";
    ::close(fd_);
    fd_ = -1;
    throw errors::connection_failed("cannot open the " + file_store_name(path_) + ": " + why);
  }
  set_timeout(kDefaultTimeout);
}

FileStore::~FileStore() {
  if (fd_ >= 0) ::close(fd_);
}

void FileStore::io_failed(const std::string& what) const {
  throw errors::connection_failed(file_store_name(path_) + ": " + what + ": " + std::strerror(errno));
}

FileStore::Table FileStore::load(const Lock&) const {
  struct stat st{};
  if (::fstat(fd_, &st) != 0) io_failed("cannot stat it");
  if (static_cast<uint64_t>(st.st_size) > kFileStoreMaxFileBytes) {
    throw errors::protocol_error(file_store_name(path_) + ": " + std::to_string(st.st_size) + " bytes, over the limit of " +
                                 std::to_string(kFileStoreMaxFileBytes >> 20) + " MiB");
  }
  // In pieces, to the end of what is there: one past the bound is enough to refuse a file that
  // grew since fstat (a writer that ignores the lock), and no more is ever held.
  std::string bytes;
  for (;;) {
    const size_t at = bytes.size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kReadChunk, kFileStoreMaxFileBytes + 1 - at));
    if (want == 0) break;
    bytes.resize(at + want);
    const ssize_t n = ::pread(fd_, bytes.data() + at, want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) {
      bytes.resize(at);
      continue;
    }
    if (n < 0) io_failed("cannot read it");
    bytes.resize(at + static_cast<size_t>(n));
    if (n == 0) break;
  }
  return decode_file_store(bytes, path_);
}

void FileStore::save(const Lock&, const Table& table) const {
  const std::string out = encode_file_store(table, path_);
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pwrite(fd_, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_failed("cannot write it");
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd_, static_cast<off_t>(out.size())) != 0) io_failed("cannot truncate it");
}

FileStore::Table FileStore::read() {
  const Lock lock(*this, /*exclusive=*/false);
  return load(lock);
}

template <typename F>
auto FileStore::modify(F change) {
  const Lock lock(*this, /*exclusive=*/true);
  Table table = load(lock);
  auto result = change(table);
  save(lock, table);
  return result;
}

template <typename F>
bool FileStore::poll_until(F ready, runtime::TimePoint deadline) {
  for (;;) {
    if (ready(read())) return true;
    const runtime::TimePoint now = clock_.now();
    if (now >= deadline) return false;
    clock_.sleep(std::min(kPollInterval, deadline - now));
  }
}

void FileStore::set(const std::string& key, store::Bytes value) {
  modify([&](Table& t) {
    t.put(key, std::move(value), path_);
    return 0;
  });
}

store::Bytes FileStore::get(const std::string& key) { return multi_get({key}).front(); }

store::Bytes FileStore::compare_set(const std::string& key, const store::Bytes& expected, store::Bytes desired) {
  return modify([&](Table& t) {
    const auto it = t.keys.find(key);
    if (it == t.keys.end()) {
      if (!expected.empty()) return expected;
      t.put(key, desired, path_);
      return desired;
    }
    if (it->second.value == expected) t.put(key, std::move(desired), path_);
    return t.keys.at(key).value;
  });
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  return modify([&](Table& t) {
    const auto it = t.keys.find(key);
    const int64_t before = it == t.keys.end() ? 0 : store::stored_integer(key, it->second.value);
    const int64_t after = store::wrapping_add(before, delta);
    const std::string text = std::to_string(after);
    t.put(key, store::Bytes(text.begin(), text.end()), path_);
    return after;
  });
}

void FileStore::wait(const std::vector<std::string>& keys) { (void)multi_get(keys); }

bool FileStore::check(const std::vector<std::string>& keys) {
  const Table t = read();
  for (const std::string& k : keys) {
    if (!t.keys.contains(k)) return false;
  }
  return true;
}

bool FileStore::delete_key(const std::string& key) {
  return modify([&](Table& t) { return t.keys.erase(key) > 0; });
}

int64_t FileStore::num_keys() { return static_cast<int64_t>(read().keys.size()); }

std::vector<store::Bytes> FileStore::multi_get(const std::vector<std::string>& keys) {
  std::vector<store::Bytes> out;
  const bool all = poll_until(
      [&](const Table& t) {
        out.clear();
        for (const std::string& k : keys) {
          const auto it = t.keys.find(k);
          if (it == t.keys.end()) return false;
          out.push_back(it->second.value);
        }
        return true;
      },
      clock_.now() + timeout());
  if (!all) {
    throw errors::timed_out(file_store_name(path_) + ": waited " + rendezvous::describe(timeout()) + " for " + keys_text(keys));
  }
  return out;
}

void FileStore::multi_set(const std::vector<std::string>& keys, std::vector<store::Bytes> values) {
  DAGSIM_ASSERT(keys.size() == values.size());
  modify([&](Table& t) {
    for (size_t i = 0; i < keys.size(); ++i) t.put(keys[i], std::move(values[i]), path_);
    return 0;
  });
}

store::Versioned FileStore::get_versioned(const std::string& key) {
  const Table t = read();
  const auto it = t.keys.find(key);
  return it == t.keys.end() ? store::Versioned{} : it->second;
}

store::CasOutcome FileStore::compare_set_version(const std::string& key, uint64_t expected_version, store::Bytes desired) {
  return modify([&](Table& t) {
    const auto it = t.keys.find(key);
    const uint64_t version = it == t.keys.end() ? 0 : it->second.version;
    if (version != expected_version) return store::CasOutcome{false, it == t.keys.end() ? store::Versioned{} : it->second};
    t.put(key, std::move(desired), path_);
    return store::CasOutcome{true, t.keys.at(key)};
  });
}

store::Versioned FileStore::watch(const std::string& key, uint64_t known_version) {
  store::Versioned now = watch_at_most(key, known_version, timeout());
  if (now.version == known_version) {
    throw errors::timed_out(file_store_name(path_) + ": " + printable(key) + " did not change within " + rendezvous::describe(timeout()));
  }
  return now;
}

store::Versioned FileStore::watch_at_most(const std::string& key, uint64_t known_version, runtime::Duration timeout) {
  store::Versioned now;
  (void)poll_until(
      [&](const Table& t) {
        const auto it = t.keys.find(key);
        now = it == t.keys.end() ? store::Versioned{} : it->second;
        return now.version != known_version;
      },
      clock_.now() + timeout);
  return now;
}

}  // namespace dagsim::net
