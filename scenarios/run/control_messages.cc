// The control protocol's one codec (control_messages.h).
#include "scenarios/run/control_messages.h"

#include <limits>

#include "core/base/error.h"

namespace dagsim::scenarios::control {

using json = nlohmann::json;

namespace {

// One message's fields, read with the checks the header promises; errors name the message.
class Fields {
 public:
  Fields(const json& message, std::string kind) : message_(message), kind_(std::move(kind)) {}

  const json& at(const char* key) const {
    const auto it = message_.find(key);
    if (it == message_.end()) throw bad(key, "is missing");
    return *it;
  }
  uint64_t u64(const char* key) const {
    const json& v = at(key);
    // Parsed text holds a whole number >= 0 as unsigned; one built in code may hold it signed.
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    throw bad(key, "is not a whole number >= 0");
  }
  uint32_t u32(const char* key) const {
    const uint64_t v = u64(key);
    if (v > std::numeric_limits<uint32_t>::max()) throw bad(key, "is over 2^32 - 1");
    return static_cast<uint32_t>(v);
  }
  int64_t i64(const char* key, int64_t min = std::numeric_limits<int64_t>::min()) const {
    const json& v = at(key);
    int64_t out = 0;
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) throw bad(key, "is over 2^63 - 1");
      out = static_cast<int64_t>(v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      out = v.get<int64_t>();
    } else {
      throw bad(key, "is not a whole number");
    }
    if (out < min) throw bad(key, "is below " + std::to_string(min));
    return out;
  }
  bool boolean(const char* key) const {
    const json& v = at(key);
    if (!v.is_boolean()) throw bad(key, "is not true or false");
    return v.get<bool>();
  }
  std::string str(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) throw bad(key, "is not a string");
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > kMaxControlString) throw bad(key, "is over " + std::to_string(kMaxControlString) + " bytes");
    return s;
  }
  const json& object(const char* key) const {
    const json& v = at(key);
    if (!v.is_object()) throw bad(key, "is not an object");
    return v;
  }
  NodeStats stats(const char* key) const {
    const Fields s(object(key), kind_ + "'s " + key);
    return {s.u64("sent"), s.u64("delivered"), s.u64("dropped"), s.u64("connection_failures"),
            s.u64("refused"), s.u64("bytes_sent"), s.u64("writes")};
  }

 private:
  Error bad(const char* key, const std::string& what) const {
    return errors::protocol_error("control message \"" + kind_ + "\": \"" + key + "\" " + what);
  }
  const json& message_;
  const std::string kind_;
};

// The name field of a message ("op" or "event").
std::string kind_of(const json& message, const char* field) {
  if (!message.is_object()) throw errors::protocol_error("a control message that is not a JSON object");
  const auto it = message.find(field);
  if (it == message.end() || !it->is_string()) {
    throw errors::protocol_error(std::string("a control message without a string \"") + field + "\"");
  }
  const std::string& kind = it->get_ref<const std::string&>();
  if (kind.size() > 64) throw errors::protocol_error(std::string("a control message whose \"") + field + "\" is over 64 bytes");
  return kind;
}

json stats_json(const NodeStats& s) {
  return {{"sent", s.sent}, {"delivered", s.delivered}, {"dropped", s.dropped}, {"connection_failures", s.connection_failures},
          {"refused", s.refused}, {"bytes_sent", s.bytes_sent}, {"writes", s.writes}};
}

}  // namespace

std::string_view name_of(const Command& command) {
  return std::visit(Overloaded{[](const Setup&) { return "setup"; }, [](const Start&) { return "start"; },
                               [](const Kill&) { return "kill"; }, [](const Crash&) { return "crash"; },
                               [](const Block&) { return "block"; }, [](const Struck&) { return "struck"; },
                               [](const Finish&) { return "finish"; }, [](const Exit&) { return "exit"; }},
                    command);
}

std::string_view name_of(const Event& event) {
  return std::visit(Overloaded{[](const Hello&) { return "hello"; }, [](const Refused&) { return "refused"; },
                               [](const Busy&) { return "busy"; }, [](const Idle&) { return "idle"; },
                               [](const WorkloadReport&) { return "workload"; }, [](const Stats&) { return "stats"; },
                               [](const Record&) { return "record"; }, [](const Failure&) { return "failure"; },
                               [](const ConnectionFailed&) { return "connection_failed"; },
                               [](const Finished&) { return "finished"; }},
                    event);
}

json encode(const Command& command) {
  json m = std::visit(
      Overloaded{[](const Setup& s) {
                   return json{{"scenario", s.scenario}, {"digest", s.digest}, {"seed", s.seed}, {"file", s.file}, {"run", s.run}};
                 },
                 [](const Start& s) { return json{{"start_wall_ns", s.start_wall_ns}}; },
                 [](const Block& b) { return json{{"peer", b.peer}, {"blocked", b.blocked}}; },
                 [](const Struck& s) { return json{{"id", s.id}, {"more", s.more}}; },
                 [](const Finish& f) { return json{{"drain_ms", f.drain_ms}}; },
                 [](const auto&) { return json::object(); }},
      command);
  m["op"] = std::string(name_of(command));
  return m;
}

json encode(const Event& event) {
  json m = std::visit(
      Overloaded{[](const Hello& h) { return json{{"node", h.node}, {"incarnation", h.incarnation}, {"pid", h.pid}}; },
                 [](const Refused& r) { return json{{"why", r.why}}; },
                 [](const WorkloadReport& w) {
                   json j{{"what", w.what}, {"value", w.value}};
                   if (w.id) j["id"] = *w.id;
                   return j;
                 },
                 [](const Stats& s) { return json{{"stats", stats_json(s.stats)}}; },
                 [](const Record& r) { return json{{"data", r.data}}; },
                 [](const Failure& f) { return json{{"time_ns", f.time_ns}, {"fiber", f.fiber}, {"what", f.what}}; },
                 [](const ConnectionFailed& c) { return json{{"peer", c.peer}, {"time_ns", c.time_ns}}; },
                 [](const Finished& f) { return json{{"stats", stats_json(f.stats)}}; },
                 [](const auto&) { return json::object(); }},
      event);
  m["event"] = std::string(name_of(event));
  return m;
}

Command decode_command(const json& message) {
  const std::string op = kind_of(message, "op");
  const Fields f(message, op);
  if (op == "setup") return Setup{f.str("scenario"), f.str("digest"), f.u64("seed"), f.str("file"), f.str("run")};
  if (op == "start") return Start{f.i64("start_wall_ns", 0)};
  if (op == "kill") return Kill{};
  if (op == "crash") return Crash{};
  if (op == "block") return Block{f.u32("peer"), f.boolean("blocked")};
  if (op == "struck") return Struck{f.u64("id"), f.boolean("more")};
  if (op == "finish") return Finish{f.i64("drain_ms", 0)};
  if (op == "exit") return Exit{};
  throw errors::protocol_error("control message with an unknown op (" + std::to_string(op.size()) + " bytes)");
}

Event decode_event(const json& message) {
  const std::string event = kind_of(message, "event");
  const Fields f(message, event);
  if (event == "hello") return Hello{f.u32("node"), f.u32("incarnation"), f.i64("pid", 0)};
  if (event == "refused") return Refused{f.str("why")};
  if (event == "busy") return Busy{};
  if (event == "idle") return Idle{};
  if (event == "workload") {
    WorkloadReport w{f.str("what"), f.u64("value"), std::nullopt};
    if (message.contains("id")) w.id = f.u64("id");
    return w;
  }
  if (event == "stats") return Stats{f.stats("stats")};
  if (event == "record") return Record{f.object("data")};
  if (event == "failure") return Failure{f.i64("time_ns"), f.str("fiber"), f.str("what")};
  if (event == "connection_failed") return ConnectionFailed{f.u32("peer"), f.i64("time_ns")};
  if (event == "finished") return Finished{f.stats("stats")};
  throw errors::protocol_error("control message with an unknown event (" + std::to_string(event.size()) + " bytes)");
}

json parse_message(std::string_view text) {
  // nlohmann's parser keeps its own stack, but dump() and comparisons recurse: the depth is bounded
  // while parsing, before anything downstream walks the value.
  const json::parser_callback_t bound = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxControlDepth) {
      throw errors::protocol_error("a control message nested deeper than " + std::to_string(kMaxControlDepth));
    }
    return true;
  };
  json message = json::parse(text.begin(), text.end(), bound, /*allow_exceptions=*/false);
  if (message.is_discarded()) throw errors::protocol_error("a control message that is not JSON");
  if (!message.is_object()) throw errors::protocol_error("a control message that is not a JSON object");
  return message;
}

}  // namespace dagsim::scenarios::control
