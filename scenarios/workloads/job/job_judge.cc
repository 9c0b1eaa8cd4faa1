// The judge side of a [job] scenario (job_judge.h).
// SKELETON: the check table is final; the judge's bodies are being written (issue 51).
#include "scenarios/workloads/job/job_judge.h"

#include <string_view>

namespace dagsim::scenarios {

namespace {

class JobJudge final : public Judge {
 public:
  JobJudge(const Scenario& scenario, const RunRecords& records) : scenario_(scenario), records_(records) {}

  nlohmann::json results(const ReportOptions&) const override { return nlohmann::json::object(); }

  CheckResult rendezvous_invariants(const CheckSpec& spec) const { return pending(spec); }
  CheckResult job_succeeded(const CheckSpec& spec) const { return pending(spec); }
  CheckResult no_orphans(const CheckSpec& spec) const { return pending(spec); }
  CheckResult reformed_within(const CheckSpec& spec) const { return pending(spec); }
  CheckResult restarts(const CheckSpec& spec) const { return pending(spec); }
  CheckResult command(const CheckSpec& spec) const { return pending(spec); }

 private:
  static CheckResult pending(const CheckSpec& spec) { return {spec.kind, false, "not judged yet"}; }
  const Scenario& scenario_;
  const RunRecords& records_;
};

constexpr std::string_view kInvariantKeys[] = {"l6"};
constexpr std::string_view kSucceededKeys[] = {"expect_failure"};
constexpr std::string_view kReformedKeys[] = {"ms"};
constexpr std::string_view kRestartsKeys[] = {"min", "max"};
constexpr std::string_view kCommandKeys[] = {"run", "reference_run"};

constexpr CheckKind kChecks[] = {
    {"rendezvous_invariants", false, false, false, &judge_by<JobJudge, &JobJudge::rendezvous_invariants>, nullptr,
     kInvariantKeys},
    {"job_succeeded", false, false, true, &judge_by<JobJudge, &JobJudge::job_succeeded>, nullptr, kSucceededKeys},
    {"no_orphans", false, false, false, &judge_by<JobJudge, &JobJudge::no_orphans>},
    {"reformed_within", false, false, false, &judge_by<JobJudge, &JobJudge::reformed_within>, nullptr, kReformedKeys},
    {"restarts", false, false, false, &judge_by<JobJudge, &JobJudge::restarts>, nullptr, kRestartsKeys},
    {"command", false, false, false, &judge_by<JobJudge, &JobJudge::command>, nullptr, kCommandKeys},
};

}  // namespace

std::span<const CheckKind> job_check_kinds() { return kChecks; }

std::unique_ptr<Judge> make_job_judge(const Scenario& scenario, const RunRecords& records) {
  return std::make_unique<JobJudge>(scenario, records);
}

}  // namespace dagsim::scenarios
