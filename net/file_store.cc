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
#include "core/rendezvous/rendezvous_settings.h"
#include "core/store/store_integer.h"

namespace dagsim::net {

namespace {

constexpr char kMagic[8] = {'D', 'G', 'F', 'S', '0', '0', '0', '1'};
constexpr uint64_t kMaxKeyBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxValueBytes = uint64_t{256} << 20;

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Reads the file's bytes front to back, every length checked against what is left.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  uint64_t u64(const char* field) { return number(8, field); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(number(4, field)); }
  std::string text(uint64_t n, const char* field) {
    need(n, field);
    std::string out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }
  bool done() const { return at_ == bytes_.size(); }
  [[noreturn]] void corrupt(const std::string& why) const {
    throw errors::protocol_error("file store " + path_ + ": " + why + " (at byte " + std::to_string(at_) + ")");
  }

 private:
  void need(uint64_t n, const char* field) const {
    if (n > bytes_.size() - at_) corrupt(std::string(field) + " runs past the end of the file");
  }
  uint64_t number(int n, const char* field) {
    need(static_cast<uint64_t>(n), field);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(bytes_[at_ + static_cast<size_t>(i)])} << (8 * i);
    at_ += static_cast<size_t>(n);
    return v;
  }
  const std::string& bytes_;
  const std::string& path_;
  size_t at_ = 0;
};

std::string keys_text(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) out += (i ? ", " : "") + keys[i];
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
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw errors::connection_failed("cannot open the file store " + path_ + ": " + std::strerror(errno));
  set_timeout(kDefaultTimeout);
}

FileStore::~FileStore() {
  if (fd_ >= 0) ::close(fd_);
}

void FileStore::io_failed(const std::string& what) const {
  throw errors::connection_failed("file store " + path_ + ": " + what + ": " + std::strerror(errno));
}

FileStore::Table FileStore::load(const Lock&) const {
  struct stat st{};
  if (::fstat(fd_, &st) != 0) io_failed("cannot stat it");
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_failed("cannot read it");
    if (n == 0) break;  // shorter than fstat said: read what is there
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  Table table;
  if (bytes.empty()) return table;  // a new store
  Reader r(bytes, path_);
  if (r.text(sizeof kMagic, "the header") != std::string(kMagic, sizeof kMagic)) r.corrupt("not a dagsim file store");
  table.last_version = r.u64("the last version");
  const uint64_t count = r.u64("the key count");
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t version = r.u64("a key's version");
    const uint32_t key_len = r.u32("a key's length");
    const uint64_t value_len = r.u64("a value's length");
    if (key_len > kMaxKeyBytes || value_len > kMaxValueBytes) r.corrupt("a key or value over the limits");
    std::string key = r.text(key_len, "a key");
    const std::string value = r.text(value_len, "a value");
    if (version == 0 || version > table.last_version) r.corrupt("key " + key + " has version " + std::to_string(version));
    if (!table.keys.emplace(std::move(key), store::Versioned{store::Bytes(value.begin(), value.end()), version}).second) {
      r.corrupt("a key twice");
    }
  }
  if (!r.done()) r.corrupt("bytes after the last key");
  return table;
}

void FileStore::save(const Lock&, const Table& table) const {
  std::string out(kMagic, sizeof kMagic);
  put_u64(out, table.last_version);
  put_u64(out, table.keys.size());
  for (const auto& [key, v] : table.keys) {
    put_u64(out, v.version);
    put_u32(out, static_cast<uint32_t>(key.size()));
    put_u64(out, v.value.size());
    out += key;
    out.append(v.value.begin(), v.value.end());
  }
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
    t.put(key, std::move(value));
    return 0;
  });
}

store::Bytes FileStore::get(const std::string& key) { return multi_get({key}).front(); }

store::Bytes FileStore::compare_set(const std::string& key, const store::Bytes& expected, store::Bytes desired) {
  return modify([&](Table& t) {
    const auto it = t.keys.find(key);
    if (it == t.keys.end()) {
      if (!expected.empty()) return expected;
      t.put(key, desired);
      return desired;
    }
    if (it->second.value == expected) t.put(key, std::move(desired));
    return t.keys.at(key).value;
  });
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  return modify([&](Table& t) {
    const auto it = t.keys.find(key);
    const int64_t before = it == t.keys.end() ? 0 : store::stored_integer(key, it->second.value);
    const int64_t after = store::wrapping_add(before, delta);
    const std::string text = std::to_string(after);
    t.put(key, store::Bytes(text.begin(), text.end()));
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
    throw errors::timed_out("file store " + path_ + ": waited " + rendezvous::describe(timeout()) + " for " + keys_text(keys));
  }
  return out;
}

void FileStore::multi_set(const std::vector<std::string>& keys, std::vector<store::Bytes> values) {
  DAGSIM_ASSERT(keys.size() == values.size());
  modify([&](Table& t) {
    for (size_t i = 0; i < keys.size(); ++i) t.put(keys[i], std::move(values[i]));
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
    t.put(key, std::move(desired));
    return store::CasOutcome{true, t.keys.at(key)};
  });
}

store::Versioned FileStore::watch(const std::string& key, uint64_t known_version) {
  store::Versioned now = watch_at_most(key, known_version, timeout());
  if (now.version == known_version) {
    throw errors::timed_out("file store " + path_ + ": " + key + " did not change within " + rendezvous::describe(timeout()));
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
