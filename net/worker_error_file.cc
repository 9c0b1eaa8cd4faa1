// A worker's torchelastic error file, read within bounds (worker_error_file.h).
#include "net/worker_error_file.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/base/bounded_file.h"
#include "core/base/printable.h"

namespace dagsim::net {

namespace {

struct TooDeep {};

// torchelastic writes the timestamp as a string of whole seconds ("1700000000"), the signal
// handler's file as a number; either is taken, anything else is not.
std::optional<int64_t> seconds_of(const nlohmann::json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (!j.is_string()) return std::nullopt;
  const std::string text = j.get<std::string>();
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(text);
}

// PyTorch's ProcessFailure._get_error_data: {"message": "...", "timestamp": N} or
// {"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp": "N"}}}.
std::string take_fields(const nlohmann::json& j, WorkerErrorFile& out) {
  if (!j.is_object() || !j.contains("message")) return "not torchelastic's error file: no \"message\"";
  const nlohmann::json& m = j["message"];
  if (m.is_string()) {
    out.message = m.get<std::string>();
    if (j.contains("timestamp")) out.timestamp = seconds_of(j["timestamp"]);
    return "";
  }
  if (!m.is_object()) return "not torchelastic's error file: \"message\" is neither text nor an object";
  if (m.contains("message") && m["message"].is_string()) out.message = m["message"].get<std::string>();
  if (m.contains("extraInfo") && m["extraInfo"].is_object()) {
    const nlohmann::json& extra = m["extraInfo"];
    if (extra.contains("py_callstack") && extra["py_callstack"].is_string()) out.traceback = extra["py_callstack"].get<std::string>();
    if (extra.contains("timestamp")) out.timestamp = seconds_of(extra["timestamp"]);
  }
  return "";
}

}  // namespace

WorkerErrorFile read_worker_error_file(const std::string& path) {
  WorkerErrorFile out;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return out;
  out.exists = true;
  std::string text;
  try {
    text = read_bounded_file(path, kWorkerErrorFileMax, ErrorCode::invalid_argument, "a worker's error file");
  } catch (const Error& e) {
    out.problem = e.detail();
    return out;
  }
  // The parser keeps its own stack, but what walks the value afterwards does not: a file of a
  // million '[' is refused as the parser reaches the bound, before it builds anything below it.
  const nlohmann::json::parser_callback_t bound = [](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start;
    if (opens && static_cast<size_t>(depth) >= kWorkerErrorFileDepth) throw TooDeep{};
    return true;
  };
  try {
    if (text.find('\0') != std::string::npos) throw nlohmann::json::parse_error::create(101, 0, "a NUL byte", nullptr);
    out.problem = take_fields(nlohmann::json::parse(text, bound), out);
  } catch (const TooDeep&) {
    out.problem = "nested deeper than " + std::to_string(kWorkerErrorFileDepth) + " arrays or objects";
  } catch (const nlohmann::json::exception&) {
    out.problem = "not JSON";
  }
  out.text = text.substr(0, 4096);
  return out;
}

int64_t WorkerFailureRecord::timestamp() const {
  if (error.timestamp) return *error.timestamp;
  return std::chrono::duration_cast<std::chrono::seconds>(seen.time_since_epoch()).count();
}

}  // namespace dagsim::net
