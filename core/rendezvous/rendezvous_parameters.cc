// RendezvousParameters and PyTorch's parsers of rendezvous strings (rendezvous_parameters.h).
#include "core/rendezvous/rendezvous_parameters.h"

#include <cmath>
#include <limits>

#include "core/base/error.h"

namespace dagsim::rendezvous {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string strip(const std::string& text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Python's int(str): whitespace around, one sign, digits with single '_' between them.
std::optional<int64_t> python_int(const std::string& text) {
  const std::string s = strip(text);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size() || !is_digit(s[i])) return std::nullopt;
  // Accumulate as a negative number: int64's range is one wider below zero.
  int64_t value = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i + 1 == s.size() || !is_digit(s[i + 1])) return std::nullopt;
      continue;
    }
    if (!is_digit(s[i])) return std::nullopt;
    const int digit = s[i] - '0';
    if (value < (std::numeric_limits<int64_t>::min() + digit) / 10) return std::nullopt;
    value = value * 10 - digit;
  }
  if (!negative) {
    if (value == std::numeric_limits<int64_t>::min()) return std::nullopt;
    value = -value;
  }
  return value;
}

Error bad_option(const std::string& key, const char* kind) {
  return errors::invalid_argument("The rendezvous configuration option '" + key + "' does not represent a valid " +
                                  kind + " value.");
}

// A timeout option: PyTorch's whole seconds, or (dagsim) decimal seconds. Absent: `into` stays.
// Not positive: the RendezvousTimeout message, from validate(); too long to hold: refused here.
void read_seconds(const RendezvousParameters& params, const std::string& key, Duration& into) {
  const auto text = params.get(key);
  if (!text) return;
  if (const auto whole = python_int(*text)) {
    if (*whole > std::chrono::duration_cast<std::chrono::seconds>(Duration::max()).count() / 2 ||
        *whole < -std::chrono::duration_cast<std::chrono::seconds>(Duration::max()).count() / 2) {
      throw errors::invalid_argument("The rendezvous configuration option '" + key + "' (" + *text +
                                     " seconds) is too long.");
    }
    into = std::chrono::seconds(*whole);
    return;
  }
  const std::string s = strip(*text);
  char* end = nullptr;
  const double seconds = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(seconds) ||
      s.find_first_not_of("+-0123456789.") != std::string::npos) {
    throw errors::invalid_argument("The rendezvous configuration option '" + key +
                                   "' does not represent a valid number of seconds.");
  }
  if (std::fabs(seconds) > 1e9) {
    throw errors::invalid_argument("The rendezvous configuration option '" + key + "' (" + *text +
                                   " seconds) is too long.");
  }
  into = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

RendezvousParameters::RendezvousParameters(std::string backend, std::string endpoint, std::string run_id,
                                           int64_t min_nodes, int64_t max_nodes,
                                           std::map<std::string, std::string> config)
    : backend_(std::move(backend)),
      endpoint_(std::move(endpoint)),
      run_id_(std::move(run_id)),
      min_nodes_(min_nodes),
      max_nodes_(max_nodes),
      config_(std::move(config)) {
  if (backend_.empty()) throw errors::invalid_argument("The rendezvous backend name must be a non-empty string.");
  if (min_nodes_ < 1) {
    throw errors::invalid_argument("The minimum number of rendezvous nodes (" + std::to_string(min_nodes_) +
                                   ") must be greater than zero.");
  }
  if (max_nodes_ < min_nodes_) {
    throw errors::invalid_argument("The maximum number of rendezvous nodes (" + std::to_string(max_nodes_) +
                                   ") must be greater than or equal to the minimum number of rendezvous nodes (" +
                                   std::to_string(min_nodes_) + ").");
  }
}

std::optional<std::string> RendezvousParameters::get(const std::string& key) const {
  const auto it = config_.find(key);
  if (it == config_.end()) return std::nullopt;
  return it->second;
}

std::string RendezvousParameters::get(const std::string& key, const std::string& fallback) const {
  return get(key).value_or(fallback);
}

std::optional<bool> RendezvousParameters::get_as_bool(const std::string& key) const {
  const auto text = get(key);
  if (!text) return std::nullopt;
  const std::string l = lower(*text);
  if (l == "1" || l == "true" || l == "t" || l == "yes" || l == "y") return true;
  if (l == "0" || l == "false" || l == "f" || l == "no" || l == "n") return false;
  throw bad_option(key, "boolean");
}

bool RendezvousParameters::get_as_bool(const std::string& key, bool fallback) const {
  return get_as_bool(key).value_or(fallback);
}

std::optional<int64_t> RendezvousParameters::get_as_int(const std::string& key) const {
  const auto text = get(key);
  if (!text) return std::nullopt;
  const auto value = python_int(*text);
  if (!value) throw bad_option(key, "integer");
  return value;
}

int64_t RendezvousParameters::get_as_int(const std::string& key, int64_t fallback) const {
  return get_as_int(key).value_or(fallback);
}

std::map<std::string, std::string> parse_rendezvous_config(const std::string& text) {
  std::map<std::string, std::string> config;
  const std::string s = strip(text);
  if (s.empty()) return config;
  for (size_t begin = 0; begin <= s.size();) {
    const size_t comma = std::min(s.find(',', begin), s.size());
    const std::string item = s.substr(begin, comma - begin);
    const size_t eq = item.find('=');
    const std::string key = strip(item.substr(0, eq));
    if (key.empty()) {
      throw errors::invalid_argument(
          "The rendezvous configuration string must be in format <key1>=<value1>,...,<keyN>=<valueN>.");
    }
    const std::string value = eq == std::string::npos ? std::string() : strip(item.substr(eq + 1));
    if (value.empty()) {
      throw errors::invalid_argument("The rendezvous configuration option '" + key + "' must have a value specified.");
    }
    config[key] = value;
    begin = comma + 1;
  }
  return config;
}

std::optional<uint32_t> try_parse_port(const std::string& text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  uint32_t port = 0;
  for (char c : text) {
    if (!is_digit(c)) return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  return port;
}

RendezvousEndpoint parse_rendezvous_endpoint(const std::string& text, uint16_t default_port) {
  const std::string endpoint = strip(text);
  if (endpoint.empty()) return {"localhost", default_port};
  std::string host = endpoint;
  std::optional<std::string> port_text;
  // "[v6]" alone is a host; otherwise the last ':' splits off the port ("[v6]:port" too).
  if (!(endpoint.front() == '[' && endpoint.back() == ']')) {
    if (const size_t colon = endpoint.rfind(':'); colon != std::string::npos) {
      host = endpoint.substr(0, colon);
      port_text = endpoint.substr(colon + 1);
    }
  }
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  uint16_t port = default_port;
  if (port_text) {
    const auto parsed = try_parse_port(*port_text);
    if (!parsed || *parsed >= 65536) {
      throw errors::invalid_argument("The port number of the rendezvous endpoint '" + endpoint +
                                     "' must be an integer between 0 and 65536.");
    }
    port = static_cast<uint16_t>(*parsed);
  }
  // PyTorch's ^[\w\.:-]+$, with \w taken as ASCII (Python's also takes Unicode letters).
  const bool valid = !host.empty() && host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789_.:-") == std::string::npos;
  if (!valid) {
    throw errors::invalid_argument("The hostname of the rendezvous endpoint '" + endpoint +
                                   "' must be a dot-separated list of labels, an IPv4 address, or an IPv6 address.");
  }
  return {host, port};
}

RendezvousSettings settings_from_parameters(const RendezvousParameters& params) {
  RendezvousSettings settings;
  settings.run_id = params.run_id();
  if (params.max_nodes() > kMaxRendezvousNodes) {
    throw errors::invalid_argument("The maximum number of rendezvous nodes (" + std::to_string(params.max_nodes()) +
                                   ") must be at most " + std::to_string(kMaxRendezvousNodes) + ".");
  }
  settings.min_nodes = static_cast<uint32_t>(params.min_nodes());
  settings.max_nodes = static_cast<uint32_t>(params.max_nodes());
  read_seconds(params, "join_timeout", settings.timeout.join);
  read_seconds(params, "last_call_timeout", settings.timeout.last_call);
  read_seconds(params, "close_timeout", settings.timeout.close);
  read_seconds(params, "heartbeat_timeout", settings.timeout.heartbeat);
  read_seconds(params, "keep_alive_interval", settings.keep_alive_interval);
  if (const auto attempts = params.get_as_int("keep_alive_max_attempt")) {
    if (*attempts < 1 || *attempts > 1000) {
      throw errors::invalid_argument("The rendezvous configuration option 'keep_alive_max_attempt' (" +
                                     std::to_string(*attempts) + ") must be 1 to 1000.");
    }
    settings.keep_alive_max_attempt = static_cast<uint32_t>(*attempts);
  }
  validate(settings);
  return settings;
}

}  // namespace dagsim::rendezvous
