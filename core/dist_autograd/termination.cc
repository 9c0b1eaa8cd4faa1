#include "core/dist_autograd/termination.h"

#include "core/base/error.h"

namespace dagsim::dist_autograd {

namespace {
constexpr size_t kMaxNamed = 20;  // send functions named in an error; the rest are counted
}  // namespace

std::string clip(std::string text, size_t max) {
  if (text.size() > max) text.resize(max);
  return text;
}

bool quiescent(const Wave& wave) {
  // A wave holds at least its initiator's report: an empty one proves nothing.
  DAGSIM_ASSERT(!wave.empty());
  uint64_t sent = 0, received = 0;
  for (const auto& [worker, report] : wave) {
    if (!report.has_context || report.busy) return false;
    sent += report.sent;
    received += report.received;
  }
  return sent == received;
}

bool proves_termination(const Wave& earlier, const Wave& later) {
  if (!quiescent(earlier) || !quiescent(later) || earlier.size() != later.size()) return false;
  DAGSIM_ASSERT(!later.empty());  // a wave holds at least its initiator's report
  for (const auto& [worker, report] : later) {
    auto it = earlier.find(worker);
    if (it == earlier.end() || it->second.sent != report.sent || it->second.received != report.received) return false;
  }
  return true;
}

std::string describe_unfinishable(WorkerId self, ContextId context, const Wave& wave) {
  DAGSIM_ASSERT_MSG(wave.count(self) == 1, "the proving wave includes the node that declares it");
  std::string workers, waiting;
  size_t total = 0;
  for (const auto& [worker, report] : wave) {
    workers += (workers.empty() ? "" : ", ") + std::to_string(worker);
    for (const std::string& s : report.waiting) {
      if (++total <= kMaxNamed) waiting += (waiting.empty() ? "" : "; ") + s;
    }
  }
  if (total > kMaxNamed) waiting += "; and " + std::to_string(total - kMaxNamed) + " more";
  return "Error on Node " + std::to_string(self) + ": backward pass of context " + short_id(static_cast<uint64_t>(context)) +
         " can never finish: every worker taking part (nodes " + workers +
         ") is idle and no gradient is in flight, yet these send functions never received gradients: " +
         (waiting.empty() ? "none reported" : waiting) +
         ". Each is an RPC whose result does not reach the backward's roots (PyTorch's FAST mode waits forever here).";
}

}  // namespace dagsim::dist_autograd
