// RendezvousParameters: what a launcher knows about the rendezvous it wants before any backend
// exists (PyTorch's RendezvousParameters): the backend's name, its endpoint, the run id, the node
// bounds, and the free-form `--rdzv_conf` options as text, read with get / get_as_bool / get_as_int.
// Also PyTorch's parsers for those strings (rendezvous/utils.py) and the handler's reading of its
// timeouts from them (dynamic_rendezvous.create_handler).
//
// Promises:
//  - Each refusal is invalid_argument (PyTorch's ValueError) with PyTorch 1.13's words, so a
//    message a user searches for is the one PyTorch would print.
//  - Pure functions of their arguments: no I/O, no clock; the backends that need the host
//    (hostname matching, stores) are in net/rendezvous_registry.h.
//
// Where dagsim reads more than PyTorch (said where each is parsed):
//  - the timeouts also take decimal seconds ("2.5"), which PyTorch's get_as_int refuses: the
//    simulator's and the tests' runs are seconds long;
//  - dagsim's own options: heartbeat_timeout, keep_alive_interval, keep_alive_max_attempt.
// Where it reads less: Python's int() takes integers of any size; get_as_int takes int64.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/rendezvous/rendezvous_settings.h"

namespace dagsim::rendezvous {

// A host and port, as an endpoint names them (an IPv6 host without its brackets).
struct RendezvousEndpoint {
  std::string host;
  uint16_t port = 0;
  friend bool operator==(const RendezvousEndpoint&, const RendezvousEndpoint&) = default;
};

class RendezvousParameters {
 public:
  // Throws invalid_argument for an empty backend, min_nodes < 1 or max_nodes < min_nodes, in
  // PyTorch's words ("The minimum number of rendezvous nodes (0) must be greater than zero.").
  RendezvousParameters(std::string backend, std::string endpoint, std::string run_id, int64_t min_nodes,
                       int64_t max_nodes, std::map<std::string, std::string> config = {});

  const std::string& backend() const { return backend_; }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& run_id() const { return run_id_; }
  int64_t min_nodes() const { return min_nodes_; }
  int64_t max_nodes() const { return max_nodes_; }
  const std::map<std::string, std::string>& config() const { return config_; }

  // A launcher's edits between parsing and creating (PyTorch's tests edit `config` in place).
  void set_endpoint(std::string endpoint) { endpoint_ = std::move(endpoint); }
  void set(const std::string& key, std::string value) { config_[key] = std::move(value); }
  void erase(const std::string& key) { config_.erase(key); }

  std::optional<std::string> get(const std::string& key) const;
  std::string get(const std::string& key, const std::string& fallback) const;
  // 1/true/t/yes/y and 0/false/f/no/n in any case; anything else throws invalid_argument
  // ("The rendezvous configuration option 'KEY' does not represent a valid boolean value.").
  std::optional<bool> get_as_bool(const std::string& key) const;
  bool get_as_bool(const std::string& key, bool fallback) const;
  // An integer as Python's int() reads text: surrounding whitespace, a sign, '_' between digits.
  // Anything else, or a value past int64, throws invalid_argument ("... valid integer value.").
  std::optional<int64_t> get_as_int(const std::string& key) const;
  int64_t get_as_int(const std::string& key, int64_t fallback) const;

 private:
  std::string backend_;
  std::string endpoint_;
  std::string run_id_;
  int64_t min_nodes_;
  int64_t max_nodes_;
  std::map<std::string, std::string> config_;
};

// "<key1>=<value1>,...,<keyN>=<valueN>": keys and values trimmed, a value may hold '=' and '/';
// an empty string gives no options. Throws invalid_argument for an item without a key or value.
std::map<std::string, std::string> parse_rendezvous_config(const std::string& text);

// One to five digits, nothing else (PyTorch's _try_parse_port; the caller checks the range).
std::optional<uint32_t> try_parse_port(const std::string& text);

// "<host>[:<port>]" (a bracketed IPv6 address with or without a port); empty or blank gives
// ("localhost", default_port). Port 0 is allowed (a server then takes any free port). Throws
// invalid_argument for a port that is not 0 to 65535 or a host that is not letters, digits, '_',
// '.', ':' and '-'.
RendezvousEndpoint parse_rendezvous_endpoint(const std::string& endpoint, uint16_t default_port);

// The handler's settings from parameters, as PyTorch's create_handler reads them: run id and node
// bounds, join_timeout (600 s), last_call_timeout (30 s), close_timeout (30 s); and dagsim's own
// heartbeat_timeout (5 s), keep_alive_interval (5 s), keep_alive_max_attempt (3). Throws
// invalid_argument for an option that does not parse, or settings validate() refuses.
RendezvousSettings settings_from_parameters(const RendezvousParameters& params);

}  // namespace dagsim::rendezvous
