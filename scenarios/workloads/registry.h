// The workload registry: every workload a scenario can run, in one table (docs/workloads.md).
//
// A workload declares here its name, its top-level TOML keys and their reader, its factory (the
// node side), its judge (built from a run's records) and its table of check kinds. The loader,
// the runner, the judge and the CLI find everything through this table: none of them names a
// workload. Adding one is a folder under scenarios/workloads/ and one line in registry.cc.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "scenarios/format/scenario.h"
#include "scenarios/format/toml_reader.h"
#include "scenarios/run/records.h"
#include "scenarios/workloads/workload.h"

namespace dagsim::scenarios {

// One kind of [[checks]] entry: the keys it takes and how it is judged.
struct CheckKind {
  std::string_view name;
  bool takes_nodes = false;       // nodes = [...]
  bool takes_tolerances = false;  // rtol, atol, equal_nan
  bool takes_message = false;     // message = "..."
  // Evaluates the check on the workload's judge (made by the same entry's make_judge).
  CheckResult (*judge)(const Judge& judge, const CheckSpec& spec) = nullptr;
  // Why the check cannot apply to `scenario`, for the loader's message; empty when it can.
  std::string (*inapplicable)(const Scenario& scenario) = nullptr;
  // Further keys the check takes, read into CheckSpec::params as the file gave them (the check's
  // judge or the workload's reader checks their types and ranges).
  std::span<const std::string_view> extra_keys = {};
  // `message` may be left out (when takes_message): the workload's own validation (WorkloadType::
  // finish) says when it is needed (a job's job_succeeded needs one only with expect_failure).
  bool message_optional = false;
};

// A top-level key a workload cannot run with, and why (a [job] is real processes: no [cluster]).
struct RefusedKey {
  std::string_view key;
  std::string_view why;
};

// Adapts a const method of a workload's Judge to CheckKind::judge.
template <typename J, CheckResult (J::*Method)(const CheckSpec&) const>
CheckResult judge_by(const Judge& judge, const CheckSpec& spec) {
  return (static_cast<const J&>(judge).*Method)(spec);
}

struct WorkloadType {
  std::string_view name;
  std::span<const std::string_view> keys;      // every top-level key of the workload
  std::span<const std::string_view> required;  // those it needs
  std::string_view shown;                      // how messages name it: "[heartbeat]"
  std::string_view to_add = {};                // how "no workload: add ..." names it (default: shown)
  // Reads the workload's keys (the loader calls it once [cluster] and the faults are known) and
  // sets scenario.workload. Fails through `reader` with the file, line and key.
  void (*read)(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario) = nullptr;
  // One line for `dagsim validate`: "heartbeat", "program (4 statements)".
  std::string (*summary)(const Scenario& scenario) = nullptr;
  // The node side, for one run with `seed`.
  std::unique_ptr<Workload> (*make)(const Scenario& scenario, uint64_t seed) = nullptr;
  // The judge side, from the run's records alone.
  std::unique_ptr<Judge> (*make_judge)(const Scenario& scenario, const RunRecords& records) = nullptr;
  std::span<const CheckKind> checks;
  // The bytes a run certainly allocates, counted from the scenario alone (the same for every seed
  // and host), so a memory limit below it is reported before the run instead of by an allocation
  // failing somewhere in it (cli/run_limits.h). Null: nothing is counted.
  uint64_t (*counted_bytes)(const Scenario& scenario) = nullptr;
  // When the workload ends, where the scenario alone says (a heartbeat run's duration), so a fault
  // scheduled later is reported before the run as one that can never fire. Null: not known before
  // the run (training ends when its steps are done); the report then says which faults fired.
  Duration (*fixed_end)(const Scenario& scenario) = nullptr;
  // The events its nodes report (NodeContext::report), which faults may strike on (`when`).
  std::span<const WorkloadEvent> events;
  // Why a fault on `trigger` (one of `events`) can never fire in `scenario`: its node never reports
  // that event, or its number is past any the run reaches ("worker2 runs no backward pass: only the
  // driver, worker0, does"). "" when it may. The loader refuses such a fault with the reason, so a
  // run never ends with a fault that "never fired" for a reason the file alone showed. Null: every
  // trigger on one of `events` may fire.
  std::string (*impossible_trigger)(const Scenario& scenario, const FaultTrigger& trigger) = nullptr;
  // The workload reads the top-level [[faults]] itself, in its own vocabulary (a job's faults
  // strike processes and a store, not simulated nodes): the loader leaves them to `read`, leaves
  // scenario.faults empty, and reads [random_faults] after `read`, against the cluster `read` set
  // (node names then resolve against the workload's own, "agent0" ..).
  bool reads_faults = false;
  // Top-level keys the workload cannot run with; the loader refuses each by name with its reason.
  std::span<const RefusedKey> refused = {};
  // Called once [[checks]] (and [random_faults]) are read: validates what spans sections, such as
  // a check's own keys (CheckSpec::params) against the workload's spec. Fails through `reader`.
  void (*finish)(const detail::TomlReader& reader, const detail::Table& top, Scenario& scenario) = nullptr;

  const CheckKind* find_check(std::string_view kind) const;
};

// Every workload, in the order the loader lists them.
std::span<const WorkloadType* const> workload_types();
// The workload named `name`, or null.
const WorkloadType* find_workload_type(std::string_view name);
// The scenario's workload. REQUIRES: a scenario from the loader, or one built with a registered name.
const WorkloadType& workload_type(const Scenario& scenario);

}  // namespace dagsim::scenarios
