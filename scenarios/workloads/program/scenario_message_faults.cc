// The message_faults key of a program workload (scenario_message_faults.h). Each entry names a
// node, a request type by its wire name, and either `fail = N` (the first N such requests the node
// sends fail at once) or `delay_ms` with `count` (the first `count` go out that much later).
#include "scenarios/workloads/program/scenario_message_faults.h"

#include "scenarios/format/scenario_keys.h"
#include <array>
#include <string>
#include <string_view>

namespace dagsim::scenarios::detail {
namespace {

constexpr std::array<std::string_view, 5> kKeys = {"node", "message", "fail", "delay_ms", "count"};
const KeySetRegistration kKeysListed{{"message_faults", "", "", kKeys}};
constexpr int64_t kMaxCount = 1'000'000;

ProgramMessageFault read_one(const TomlReader& reader, const Table& t) {
  reader.check_keys(t, kKeys, "keys in message_faults");
  ProgramMessageFault f;
  f.node = reader.node_ref(reader.required(t, "node"), t.key_path("node"));
  const toml::node& message = reader.required(t, "message");
  const std::string name = reader.string(message, t.key_path("message"));
  const std::optional<rpc::MessageType> type = rpc::request_type_named(name);
  if (!type) {
    reader.fail(message, t.key_path("message"),
                "\"" + name + "\" is no request type (e.g. call, remote_call, rref_fetch_call, backward_autograd_req, "
                "cleanup_autograd_context_req)");
  }
  f.type = *type;
  const toml::node* fail = t.get("fail");
  const toml::node* delay = t.get("delay_ms");
  if ((fail == nullptr) == (delay == nullptr)) {
    reader.fail(t.line(), t.path, "give either fail = N (fail the first N) or delay_ms (with count, default 1)");
  }
  if (fail != nullptr) {
    if (const toml::node* count = t.get("count")) reader.fail(*count, t.key_path("count"), "goes with delay_ms; fail is the count");
    f.count = static_cast<uint32_t>(reader.integer(*fail, t.key_path("fail"), 1, kMaxCount));
    return f;
  }
  f.delay = std::chrono::duration_cast<Duration>(
      std::chrono::duration<double, std::milli>(reader.number(*delay, t.key_path("delay_ms"), Range{0, kMaxDurationMs, true})));
  f.count = static_cast<uint32_t>(reader.opt_integer(t, "count", 1, kMaxCount).value_or(1));
  return f;
}

}  // namespace

std::vector<ProgramMessageFault> read_message_faults(const TomlReader& reader, const toml::node& node) {
  std::vector<ProgramMessageFault> out;
  const std::vector<const toml::table*> tables = reader.tables(node, "message_faults");
  for (size_t i = 0; i < tables.size(); ++i) {
    out.push_back(read_one(reader, Table{*tables[i], "message_faults[" + std::to_string(i) + "]"}));
  }
  return out;
}

}  // namespace dagsim::scenarios::detail
