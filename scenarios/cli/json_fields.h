// JsonFields: one object's typed fields read from a JSON file anyone may have written (a sweep's
// summary, a shard's results), each wrong one named by its path: "s.json: results[3].seed:
// expected an unsigned integer, got a string". Missing fields leave the caller's default.
//
// Promises: every refusal is Error(invalid_argument), one printable line starting with the file's
// name; nothing here throws nlohmann's type errors.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/printable.h"

namespace dagsim::cli {

// The type of `v` as an error message says it.
inline const char* json_type_of(const nlohmann::json& v) {
  using json = nlohmann::json;
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
      return v.get<int64_t>() < 0 ? "a negative integer" : "an integer";
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction";
    default: return "something else";
  }
}

inline bool json_is_count(const nlohmann::json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

struct JsonFields {
  const nlohmann::json& object;
  std::string path;  // "" for the top, "results[3]" for a seed
  const std::string& name;

  std::string where(const std::string& key) const { return printable(name, kPathMax) + ": " + (path.empty() ? "" : path + ".") + key_name(key); }
  [[noreturn]] void wrong(const std::string& key, const char* expected, const nlohmann::json& v) const {
    throw errors::invalid_argument(where(key) + ": expected " + expected + ", got " + json_type_of(v));
  }
  const nlohmann::json* find(const std::string& key) const {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }
  void text(const std::string& key, std::string& out) const {
    if (const nlohmann::json* v = find(key)) {
      if (!v->is_string()) wrong(key, "a string", *v);
      out = v->get<std::string>();
    }
  }
  void count(const std::string& key, uint64_t& out) const {
    if (const nlohmann::json* v = find(key)) {
      if (!json_is_count(*v)) wrong(key, "an unsigned integer", *v);
      out = v->get<uint64_t>();
    }
  }
  void number(const std::string& key, double& out) const {
    if (const nlohmann::json* v = find(key)) {
      if (!v->is_number()) wrong(key, "a number", *v);
      out = v->get<double>();
    }
  }
  void flag(const std::string& key, bool& out) const {
    if (const nlohmann::json* v = find(key)) {
      if (!v->is_boolean()) wrong(key, "a boolean", *v);
      out = v->get<bool>();
    }
  }
  // The field, which must be there and of `type` ("an object", "an array").
  const nlohmann::json& need(const std::string& key, nlohmann::json::value_t type, const char* expected) const {
    const nlohmann::json* v = find(key);
    if (v == nullptr) throw errors::invalid_argument(where(key) + ": missing (expected " + expected + ")");
    if (v->type() != type) wrong(key, expected, *v);
    return *v;
  }
};

}  // namespace dagsim::cli
