// FileStore's file format (file_store_format.h).
#include "net/file_store_format.h"

#include <limits>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::net {

namespace {

constexpr char kMagic[8] = {'D', 'G', 'F', 'S', '0', '0', '0', '1'};
// The fixed part of a key's record: version, key length, value length.
constexpr uint64_t kRecordHeaderBytes = 8 + 4 + 8;

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Reads the file's bytes front to back, every length checked against what is left.
class Reader {
 public:
  Reader(std::string_view bytes, std::string_view path) : bytes_(bytes), path_(path) {}
  uint64_t u64(const char* field) { return number(8, field); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(number(4, field)); }
  std::string_view text(uint64_t n, const char* field) {
    need(n, field);
    const std::string_view out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }
  uint64_t left() const { return bytes_.size() - at_; }
  bool done() const { return at_ == bytes_.size(); }
  [[noreturn]] void corrupt(const std::string& why) const {
    throw errors::protocol_error(file_store_name(path_) + ": " + why + " (at byte " + std::to_string(at_) + ")");
  }

 private:
  void need(uint64_t n, const char* field) const {
    if (n > left()) corrupt(std::string(field) + " runs past the end of the file");
  }
  uint64_t number(int n, const char* field) {
    need(static_cast<uint64_t>(n), field);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(bytes_[at_ + static_cast<size_t>(i)])} << (8 * i);
    at_ += static_cast<size_t>(n);
    return v;
  }
  std::string_view bytes_;
  std::string_view path_;
  size_t at_ = 0;
};

}  // namespace

std::string file_store_name(std::string_view path) { return "file store " + printable(path, kPathMax); }

void FileStoreTable::put(const std::string& key, store::Bytes value, std::string_view path) {
  if (last_version == std::numeric_limits<uint64_t>::max()) {
    throw errors::protocol_error(file_store_name(path) + ": its last version is 2^64-1, so no version is left for a change to " +
                                 printable(key));
  }
  if (key.size() > kFileStoreMaxKeyBytes || value.size() > kFileStoreMaxValueBytes) {
    throw errors::invalid_argument(file_store_name(path) + ": key " + printable(key) + " of " + std::to_string(key.size()) +
                                   " bytes with a value of " + std::to_string(value.size()) + " bytes, over the limits of " +
                                   mib(kFileStoreMaxKeyBytes) + " and " + mib(kFileStoreMaxValueBytes));
  }
  if (keys.size() >= kFileStoreMaxKeys && !keys.contains(key)) {
    throw errors::invalid_argument(file_store_name(path) + ": a new key " + printable(key) + " past the limit of " +
                                   std::to_string(kFileStoreMaxKeys) + " keys");
  }
  keys[key] = {std::move(value), ++last_version};
}

FileStoreTable decode_file_store(std::string_view bytes, std::string_view path) {
  FileStoreTable table;
  if (bytes.empty()) return table;  // a new store
  Reader r(bytes, path);
  if (bytes.size() > kFileStoreMaxFileBytes) {
    r.corrupt(std::to_string(bytes.size()) + " bytes, over the limit of " + mib(kFileStoreMaxFileBytes));
  }
  if (r.text(sizeof kMagic, "the header") != std::string_view(kMagic, sizeof kMagic)) r.corrupt("not a dagsim file store");
  table.last_version = r.u64("the last version");
  const uint64_t count = r.u64("the key count");
  // Each key's record takes its fixed part at least: a count the rest cannot hold is refused
  // before the loop, whatever the count says.
  if (count > kFileStoreMaxKeys) {
    r.corrupt("a key count of " + std::to_string(count) + ", over the limit of " + std::to_string(kFileStoreMaxKeys));
  }
  if (count > r.left() / kRecordHeaderBytes) r.corrupt("a key count of " + std::to_string(count) + " runs past the end of the file");
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t version = r.u64("a key's version");
    const uint32_t key_len = r.u32("a key's length");
    const uint64_t value_len = r.u64("a value's length");
    if (key_len > kFileStoreMaxKeyBytes || value_len > kFileStoreMaxValueBytes) {
      r.corrupt("a key of " + std::to_string(key_len) + " bytes or a value of " + std::to_string(value_len) +
                " bytes, over the limits of " + mib(kFileStoreMaxKeyBytes) + " and " + mib(kFileStoreMaxValueBytes));
    }
    std::string key(r.text(key_len, "a key"));
    const std::string_view value = r.text(value_len, "a value");
    if (version == 0 || version > table.last_version) {
      r.corrupt("key " + printable(key) + " has version " + std::to_string(version) + ", not one from 1 to the last version, " +
                std::to_string(table.last_version));
    }
    const auto [it, fresh] = table.keys.try_emplace(std::move(key));
    if (!fresh) r.corrupt("key " + printable(it->first) + " twice");
    it->second = store::Versioned{store::Bytes(value.begin(), value.end()), version};
  }
  if (!r.done()) r.corrupt(std::to_string(r.left()) + " bytes after the last key");
  return table;
}

std::string encode_file_store(const FileStoreTable& table, std::string_view path) {
  uint64_t size = sizeof kMagic + 16;
  for (const auto& [key, v] : table.keys) size += kRecordHeaderBytes + key.size() + v.value.size();
  if (size > kFileStoreMaxFileBytes) {
    throw errors::invalid_argument(file_store_name(path) + ": the change would make the file " + std::to_string(size) +
                                   " bytes, over the limit of " + mib(kFileStoreMaxFileBytes));
  }
  std::string out(kMagic, sizeof kMagic);
  out.reserve(size);
  put_u64(out, table.last_version);
  put_u64(out, table.keys.size());
  for (const auto& [key, v] : table.keys) {
    put_u64(out, v.version);
    put_u32(out, static_cast<uint32_t>(key.size()));
    put_u64(out, v.value.size());
    out += key;
    out.append(v.value.begin(), v.value.end());
  }
  return out;
}

}  // namespace dagsim::net
