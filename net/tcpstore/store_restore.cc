#include "net/tcpstore/store_restore.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/tcpstore/store_recorder.h"

namespace dagsim::net::tcpstore {

namespace {

using nlohmann::json;

// A record line nests at most two deep (a line, a summary inside it).
constexpr int kMaxLineDepth = 4;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

struct LineError {
  std::string why;
};

std::string text_field(const json& line, const char* name) {
  const auto it = line.find(name);
  if (it == line.end()) throw LineError{std::string("no \"") + name + "\""};
  if (it->is_object()) {
    throw LineError{std::string("the ") + name + " was recorded as a summary (its length and SHA-256), not whole"};
  }
  if (!it->is_string()) throw LineError{std::string("\"") + name + "\" is not a string"};
  return it->get<std::string>();
}

// A recorded value: hex, or a summary (refused: the bytes are not in the record).
runtime::Bytes value_field(const json& line, const char* name) {
  const auto it = line.find(name);
  if (it != line.end() && it->is_object()) {
    throw LineError{std::string("the ") + name + " was recorded as a summary (" +
                    std::to_string(it->value("bytes", uint64_t{0})) +
                    " bytes and their SHA-256), not whole: start the store with a larger --record-value-bytes"};
  }
  const std::string hex = text_field(line, name);
  if (hex.size() % 2 != 0) throw LineError{std::string("\"") + name + "\" is not hex (an odd number of digits)"};
  runtime::Bytes out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = hex_digit(hex[i]);
    const int lo = hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) throw LineError{std::string("\"") + name + "\" is not hex"};
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return out;
}

bool flag(const json& line, const char* name) {
  const auto it = line.find(name);
  if (it == line.end() || !it->is_boolean()) throw LineError{std::string("\"") + name + "\" is not true or false"};
  return it->get<bool>();
}

// Applies one line; true when it was a write.
bool replay(const json& line, store::KeyValueTable& table) {
  if (!line.is_object()) throw LineError{"not a JSON object"};
  const auto op_it = line.find("op");
  if (op_it == line.end() || !op_it->is_string()) throw LineError{"no \"op\""};
  const std::string op = op_it->get<std::string>();
  if (op == "cut") {
    throw LineError{"the record was cut at its cap (--record-max-bytes): the writes after it are not in it, so it cannot be restored"};
  }
  if (op == "set") {
    table.set(text_field(line, "key"), value_field(line, "value"));
  } else if (op == "compare_set") {
    if (!flag(line, "written")) return false;
    table.set(text_field(line, "key"), value_field(line, "value"));
  } else if (op == "add") {
    table.set(text_field(line, "key"), value_field(line, "value"));
  } else if (op == "delete_key") {
    if (!flag(line, "deleted")) return false;
    table.erase(text_field(line, "key"));
  } else {
    return false;  // start, connect, close, get, check, wait, watch_key, get_num_keys, fault, stop
  }
  return true;
}

}  // namespace

RestoreSummary restore_store_records(const std::vector<std::string>& paths, store::KeyValueTable& table) {
  RestoreSummary summary;
  for (const std::string& path : paths) {
    const std::string name = printable(path, 256);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw errors::invalid_argument(name + ": cannot read the store's record to restore");
    ++summary.files;
    std::string text;
    size_t number = 0;
    while (true) {
      text.clear();
      // Bounded: a line longer than any the recorder writes is refused before it is held whole.
      bool terminated = false;
      for (char c; in.get(c);) {
        if (c == '\n') {
          terminated = true;
          break;
        }
        if (text.size() >= kRecordMaxLineBytes) {
          throw errors::invalid_argument(name + ":" + std::to_string(number + 1) + ": longer than " +
                                         std::to_string(kRecordMaxLineBytes) + " bytes: not a store record line");
        }
        text.push_back(c);
      }
      if (!terminated && text.empty()) break;
      ++number;
      const std::string at = name + ":" + std::to_string(number) + ": ";
      json line;
      try {
        line = json::parse(text, [](int depth, json::parse_event_t, json&) {
          if (depth > kMaxLineDepth) throw LineError{"nested deeper than a store record line"};
          return true;
        });
      } catch (const json::exception& e) {
        if (!terminated) {  // torn: the store died writing it
          ++summary.torn_lines;
          break;
        }
        // The parser quotes the bytes it stopped at, which the record's writer chose.
        throw errors::invalid_argument(at + "not JSON: " + printable(e.what()));
      } catch (const LineError& e) {
        throw errors::invalid_argument(at + e.why);
      }
      try {
        if (replay(line, table)) ++summary.writes;
      } catch (const LineError& e) {
        throw errors::invalid_argument(at + e.why);
      }
      if (!terminated) break;
    }
  }
  return summary;
}

}  // namespace dagsim::net::tcpstore
