// Reading a store's record (store_record_reader.h).
#include "scenarios/workloads/rendezvous/store_record_reader.h"

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/format/bounded_json.h"

namespace dagsim::scenarios {

namespace {

constexpr size_t kSha256HexDigits = 64;

bool is_hex(std::string_view s) {
  return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

bool StoreRecordReader::read_line(std::string& line) {
  line.clear();
  std::streambuf* in = in_.rdbuf();
  for (;;) {
    const int c = in->sbumpc();
    if (c == std::char_traits<char>::eof()) return !line.empty();
    if (c == '\n') return true;
    if (line.size() >= kMaxStoreRecordLineBytes) {
      throw errors::invalid_records(at("a line longer than " + std::to_string(kMaxStoreRecordLineBytes) +
                                       " bytes (the longest the store writes)"));
    }
    line.push_back(static_cast<char>(c));
  }
}

std::optional<nlohmann::json> StoreRecordReader::next() {
  std::string text;
  for (;;) {
    ++line_;
    if (!read_line(text)) return std::nullopt;
    if (!text.empty()) break;
  }
  nlohmann::json line =
      parse_bounded_json(text, kMaxStoreRecordDepth, ErrorCode::invalid_records, path_ + ":" + std::to_string(line_));
  if (!line.is_object()) throw errors::invalid_records(at("a line that is not a JSON object"));
  return line;
}

std::string StoreRecordReader::at(const std::string& what) const {
  return printable(path_, kPathMax) + ":" + std::to_string(line_) + ": " + what;
}

RecordedValue read_value(const nlohmann::json& v, const std::string& what) {
  RecordedValue out;
  if (v.is_string()) {
    const std::string& hex = v.get_ref<const std::string&>();
    if (hex.size() % 2 != 0 || !is_hex(hex)) throw errors::invalid_records(what + ": not lowercase hex of whole bytes");
    runtime::Bytes bytes(hex.size() / 2);
    const auto digit = [](char c) { return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(digit(hex[2 * i]) << 4 | digit(hex[2 * i + 1]));
    out.size = bytes.size();
    out.bytes = std::move(bytes);
    return out;
  }
  if (!v.is_object() || v.size() != 2 || !v.contains("bytes") || !v.contains("sha256") ||
      !v.at("bytes").is_number_unsigned() || !v.at("sha256").is_string()) {
    throw errors::invalid_records(what + ": neither hex nor a summary {\"bytes\": N, \"sha256\": HEX}");
  }
  out.size = v.at("bytes").get<uint64_t>();
  out.sha256 = v.at("sha256").get<std::string>();
  if (out.sha256.size() != kSha256HexDigits || !is_hex(out.sha256)) throw errors::invalid_records(what + ": a summary's sha256 is not 64 hex digits");
  return out;
}

std::optional<std::string> read_key(const nlohmann::json& v, const std::string& what) {
  if (v.is_string()) return v.get<std::string>();
  (void)read_value(v, what);  // a summary, or refused
  return std::nullopt;
}

}  // namespace dagsim::scenarios
