// Reading etcd's replies (etcd_reply.h).
#include "net/etcd/etcd_reply.h"

#include <charconv>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::net::etcd {

namespace {

[[noreturn]] void malformed(const std::string& why) { throw errors::protocol_error("the reply's " + why); }

// "a string", "an object", "null": what a value is, for a message.
std::string a_type(const Json& value) {
  if (value.is_null()) return "null";
  return (value.is_object() || value.is_array() ? "an " : "a ") + std::string(value.type_name());
}

// `field` of `object`, or null when absent; `object` must be an object.
const Json* find(const Json& object, const char* field) {
  if (!object.is_object()) malformed(std::string(field) + " is in " + a_type(object) + ", not an object");
  const auto it = object.find(field);
  return it == object.end() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const char* field, const Json& value, const char* wanted) {
  malformed(std::string(field) + " is " + a_type(value) + ", not " + wanted);
}

}  // namespace

Json parse_reply(std::string_view text) {
  // nlohmann's parser keeps its own stack, but each level and value costs memory (and dump() and
  // comparisons recurse): both are bounded while parsing, before the value is built further.
  uint64_t values = 0;
  const Json::parser_callback_t bound = [&values](int depth, Json::parse_event_t event, Json&) {
    if (depth > kMaxReplyDepth) {
      throw errors::protocol_error("a reply nested deeper than " + std::to_string(kMaxReplyDepth));
    }
    if (event != Json::parse_event_t::key && event != Json::parse_event_t::object_end &&
        event != Json::parse_event_t::array_end && ++values > kMaxReplyValues) {
      throw errors::protocol_error("a reply of more than " + std::to_string(kMaxReplyValues) + " values");
    }
    return true;
  };
  Json reply = Json::parse(text.begin(), text.end(), bound, /*allow_exceptions=*/false);
  if (reply.is_discarded()) throw errors::protocol_error("a reply that is not JSON");
  if (!reply.is_object()) throw errors::protocol_error("a reply that is " + a_type(reply) + ", not an object");
  return reply;
}

uint64_t json_uint(const Json& object, const char* field) {
  const Json* v = find(object, field);
  if (v == nullptr) return 0;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return n;
    malformed(std::string(field) + " is " + printable(s, 40) + ", not an unsigned number");
  }
  wrong_type(field, *v, "an unsigned number");
}

bool json_bool(const Json& object, const char* field) {
  const Json* v = find(object, field);
  if (v == nullptr) return false;
  if (!v->is_boolean()) wrong_type(field, *v, "a boolean");
  return v->get<bool>();
}

const Json& json_object(const Json& object, const char* field) {
  static const Json empty = Json::object();
  const Json* v = find(object, field);
  if (v == nullptr) return empty;
  if (!v->is_object()) wrong_type(field, *v, "an object");
  return *v;
}

const Json& json_array(const Json& object, const char* field) {
  static const Json empty = Json::array();
  const Json* v = find(object, field);
  if (v == nullptr) return empty;
  if (!v->is_array()) wrong_type(field, *v, "an array");
  return *v;
}

std::string json_string(const Json& object, const char* field) {
  const Json* v = find(object, field);
  if (v == nullptr) return "";
  if (!v->is_string()) wrong_type(field, *v, "a string");
  return v->get<std::string>();
}

KeyState first_kv(const Json& range_response) {
  const Json& kvs = json_array(range_response, "kvs");
  if (kvs.empty()) return {};
  KeyState state;
  state.value = base64_decode_bytes(json_string(kvs[0], "value"));
  state.mod_revision = json_uint(kvs[0], "mod_revision");
  if (state.mod_revision == 0) malformed("kv has no mod_revision");
  return state;
}

WatchMessage watch_message(const Json& message) {
  WatchMessage out;
  if (const Json* error = find(message, "error"); error != nullptr) {
    out.error = printable(error->dump(-1, ' ', false, Json::error_handler_t::replace), 200);
    return out;
  }
  const Json& result = json_object(message, "result");
  out.created = json_bool(result, "created");
  out.canceled = json_bool(result, "canceled");
  for (const Json& event : json_array(result, "events")) {
    const std::string type = json_string(event, "type");
    if (type == "DELETE") {
      out.events.emplace_back();
      continue;
    }
    if (!type.empty() && type != "PUT") malformed("event type is " + printable(type, 40) + ", not PUT or DELETE");
    const Json& kv = json_object(event, "kv");
    KeyState state;
    state.value = base64_decode_bytes(json_string(kv, "value"));
    state.mod_revision = json_uint(kv, "mod_revision");
    if (state.mod_revision == 0) malformed("PUT event has no mod_revision");
    out.events.push_back(std::move(state));
  }
  return out;
}

template <typename F>
auto Reply::named(F read) const -> decltype(read()) {
  try {
    return read();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::protocol_error) throw;
    throw errors::protocol_error(where_ + ": " + e.detail());
  }
}

bool Reply::succeeded() const {
  return named([&] { return json_bool(json_, "succeeded"); });
}

uint64_t Reply::revision() const {
  return named([&] { return json_uint(json_object(json_, "header"), "revision"); });
}

uint64_t Reply::number(const char* field) const {
  return named([&] { return json_uint(json_, field); });
}

KeyState Reply::first_kv() const {
  return named([&] { return etcd::first_kv(json_); });
}

KeyState Reply::txn_range(size_t i) const {
  return named([&] {
    const Json& responses = json_array(json_, "responses");
    if (responses.size() <= i) malformed("responses hold " + std::to_string(responses.size()) + ", not response " + std::to_string(i));
    const Json* range = find(responses[i], "response_range");
    if (range == nullptr) malformed("response " + std::to_string(i) + " is not a response_range");
    if (!range->is_object()) wrong_type("response_range", *range, "an object");
    return etcd::first_kv(*range);
  });
}

WatchMessage Reply::watch() const {
  return named([&] { return watch_message(json_); });
}

}  // namespace dagsim::net::etcd
