// scenarios/workloads/job/job_records_fuzz.cc: the libFuzzer target for a job run's records as
// `dagsim judge DIR` reads them (job_records.h: run.json's "job", every agent incarnation's node
// data, the fault timeline), then the report drawn from them (job_report.cc's results and spans).
// Built and run by scripts/fuzz.sh (target "job_records"). A records folder may come from any
// host and anyone, so every key is untrusted. It promises to report (abort, so libFuzzer saves the
// input) any of:
//  - reading throwing anything but Error(invalid_records), or crashing, leaking, or tripping ASan,
//    UBSan or an assert, on any input;
//  - a message holding a control character (every name a record chose goes through printable());
//  - results or spans from records that were read: a span ending before it begins.
// Input: one JSON object {"job": ..., "nodes": [{"node", "incarnation", "data"}], "faults": [...],
// "outcome": "..."}, parsed with the records' bounds (kMaxRecordFileDepth); the scenario is a
// job of four agents, two workers each.
#include <cstdint>
#include <string>

#include "core/base/error.h"
#include "net/fuzz/fuzz_util.h"
#include "scenarios/workloads/job/job_records.h"
#include "scenarios/workloads/job/job_spec.h"

namespace {

using namespace dagsim;
using namespace dagsim::scenarios;

size_t depth_of(const nlohmann::json& j) {
  size_t deepest = 0;
  if (j.is_structured()) {
    for (const nlohmann::json& x : j) deepest = std::max(deepest, depth_of(x));
    return deepest + 1;
  }
  return 0;
}

Scenario job_scenario() {
  JobSpec spec;
  spec.command = {"train.py"};
  spec.agents = 4;
  spec.min_nodes = 2;
  spec.max_nodes = 4;
  spec.nproc_per_node = 2;
  Scenario s;
  s.name = "fuzz";
  s.cluster.nodes = 4;
  s.cluster.name_prefix = "agent";
  s.workload = WorkloadSpec("job", spec);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Scenario scenario = job_scenario();
  const nlohmann::json input = nlohmann::json::parse(data, data + size, nullptr, false);
  if (input.is_discarded() || !input.is_object() || depth_of(input) > kMaxRecordFileDepth) return 0;
  RunRecords records;
  records.node_names = {"agent0", "agent1", "agent2", "agent3"};
  records.outcome = input.contains("outcome") && input["outcome"].is_string() ? input["outcome"].get<std::string>() : "finished";
  records.job = input.contains("job") ? input["job"] : nlohmann::json(nullptr);
  if (input.contains("faults") && input["faults"].is_array()) records.fault_timeline = input["faults"];
  if (input.contains("nodes") && input["nodes"].is_array()) {
    for (const nlohmann::json& n : input["nodes"]) {
      if (!n.is_object()) continue;
      NodeRecord r;
      // The harness's own reading: the node data under test is what the reader takes.
      const auto number = [&](const char* key) {
        return n.contains(key) && n[key].is_number_unsigned() ? static_cast<uint32_t>(n[key].get<uint64_t>()) : 0u;
      };
      r.node = number("node") % 4;
      r.incarnation = number("incarnation");
      r.data = n.contains("data") ? n["data"] : nlohmann::json::object();
      records.nodes.push_back(std::move(r));
    }
  }
  try {
    const job_records::JobRecords job = job_records::read_job_records(scenario, records);
    (void)job_records::job_results(scenario, job).dump();
    for (const WorkloadSpan& span : job_records::job_spans(scenario, job)) DAGSIM_FUZZ_CHECK(span.end_ns >= span.begin_ns);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_records) dagsim::net::fuzz::fail("threw another error than invalid_records", e.what());
    for (const char c : e.detail()) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) dagsim::net::fuzz::fail("a control character in a message", e.what());
    }
  } catch (const nlohmann::json::exception& e) {
    dagsim::net::fuzz::fail("a JSON exception escaped the reader", e.what());
  }
  return 0;
}
