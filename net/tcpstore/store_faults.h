// StoreFaults: the store's fault layer (issue 51 item 2), faults between a store's clients and the
// store, decided per query: TcpStoreServer asks decide() for every query it reads, before it applies
// it. A rule names a kind, the queries it applies to (tcp_store_protocol.h's names: "set",
// "compare_set", "get", "add", "check", "wait", "get_num_keys", "watch_key", "delete_key"; none
// named: all), and the probability that a matching query is hit, drawn from a Prng seeded by the
// run's seed (core/base/prng.h). What a hit does:
//   delay  the query waits delay_ms before the server applies it, so its reply goes out delay_ms
//          late (and what it writes lands then); other connections are served meanwhile;
//   drop   the query is read and neither applied nor answered: the client's own timeout fires
//          (PyTorch's TCPStore client then fails that call); the connection stays open;
//   reset  the connection is closed at that query, which is not applied.
// The first rule (in order) whose queries match and whose draw hits decides; a rule of probability
// 1 hits without a draw and one of 0 never hits, so neither moves the generator.
//
// The rules come from a JSON file (`dagsim store --faults FILE`, re-read on SIGUSR1), which the job
// runner writes (scenarios/job/job_faults.cc):
//   {"faults": [{"kind": "delay"|"drop"|"reset", "ops": ["compare_set", ...], "probability": P,
//                "delay_ms": N (delay only), "name": "TEXT" (for log lines, optional)}, ...]}
// parse_store_faults() checks all of it before anything is used: at most kMaxFaultFileBytes, nested
// at most kMaxFaultDepth deep, at most kMaxFaultRules rules, every key known, every field of its
// type and range (probability in [0, 1], delay_ms in 1 .. kMaxFaultDelayMs, ops distinct and known).
// A bad file throws Error(invalid_argument) saying why; `dagsim store` logs it and keeps the rules
// it had (never a crash).
//
// Threading: the store's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/prng.h"
#include "net/tcpstore/tcp_store_protocol.h"

namespace dagsim::net::tcpstore {

inline constexpr size_t kMaxFaultFileBytes = 64 * 1024;
inline constexpr size_t kMaxFaultDepth = 4;  // {"faults": [{"ops": [...]}]}
inline constexpr size_t kMaxFaultRules = 256;
inline constexpr int64_t kMaxFaultDelayMs = 3'600'000;

struct StoreFaultRule {
  enum class Kind : uint8_t { delay, drop, reset };
  Kind kind = Kind::drop;
  uint16_t ops = 0;  // bit i: QueryType i; 0: every query
  double probability = 1.0;
  std::chrono::milliseconds delay{0};
  std::string name;

  bool matches(QueryType type) const { return ops == 0 || (ops >> static_cast<unsigned>(type) & 1u) != 0; }
};

const char* fault_kind_name(StoreFaultRule::Kind kind);
// The QueryType named `name` (query_name()'s text), or nullopt.
std::optional<QueryType> query_type_named(std::string_view name);

// The rules in `text`, or Error(invalid_argument) naming what is wrong (bounds: the header).
std::vector<StoreFaultRule> parse_store_faults(std::string_view text);
// The file's rules: an absent file is no rules; one over kMaxFaultFileBytes, unreadable or bad
// throws Error(invalid_argument) naming the file.
std::vector<StoreFaultRule> read_store_faults(const std::string& path);

struct FaultDecision {
  const StoreFaultRule* rule = nullptr;  // null: no fault; valid until the next set()
  explicit operator bool() const { return rule != nullptr; }
};

class StoreFaults {
 public:
  explicit StoreFaults(uint64_t seed) : prng_(Prng(seed).fork(0x5f0e)) {}
  void set(std::vector<StoreFaultRule> rules) { rules_ = std::move(rules); }
  const std::vector<StoreFaultRule>& rules() const { return rules_; }
  // Whether a fault hits this query, and which.
  FaultDecision decide(QueryType type);
  uint64_t hits() const { return hits_; }

 private:
  Prng prng_;
  std::vector<StoreFaultRule> rules_;
  uint64_t hits_ = 0;
};

}  // namespace dagsim::net::tcpstore
