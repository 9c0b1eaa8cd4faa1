#include "core/dist_autograd/termination.h"

#include "core/base/error.h"
#include "core/rpc/wire.h"

namespace dagsim::dist_autograd {

using rpc::Message;
using rpc::MessageType;
using rpc::WireReader;
using rpc::WireWriter;

namespace {

// Bounds on what a report may claim, so a corrupt one cannot make us allocate without limit.
constexpr uint32_t kMaxWorkers = 1u << 16;
constexpr uint32_t kMaxWaiting = 1u << 16;
constexpr size_t kMaxDescription = 4096;
constexpr size_t kMaxReason = 1 << 20;
constexpr size_t kMaxNamed = 20;  // send functions named in an error; the rest are counted

bool read_flag(WireReader& r, const char* field) {
  const uint8_t v = r.u8(field);
  if (v > 1) throw errors::protocol_error(std::string(field) + ": " + std::to_string(v) + " is not 0 or 1");
  return v == 1;
}

uint32_t read_count(WireReader& r, const char* field, uint32_t max) {
  const uint32_t n = r.u32(field);
  if (n > max) {
    throw errors::protocol_error(std::string(field) + ": " + std::to_string(n) + " exceeds the limit of " + std::to_string(max));
  }
  return n;
}

}  // namespace

Message make_probe_request(ContextId context, uint64_t wave) {
  Message m;
  m.type = MessageType::termination_probe_req;
  WireWriter w(m.payload);
  w.i64(context);
  w.u64(wave);
  return m;
}

std::pair<ContextId, uint64_t> read_probe_request(const Message& message) {
  WireReader r(message.payload);
  const ContextId context = r.i64("probe.context_id");
  const uint64_t wave = r.u64("probe.wave");
  r.expect_end("termination_probe_req");
  return {context, wave};
}

Message make_probe_report(uint64_t request_id, const ProbeReport& report) {
  Message m;
  m.type = MessageType::termination_probe_resp;
  m.request_id = request_id;
  WireWriter w(m.payload);
  w.i64(report.context);
  w.u64(report.wave);
  w.u8(report.has_context ? 1 : 0);
  w.u8(report.busy ? 1 : 0);
  w.u64(report.sent);
  w.u64(report.received);
  w.u32(static_cast<uint32_t>(report.known_workers.size()));
  for (WorkerId worker : report.known_workers) w.u16(worker);
  w.u32(static_cast<uint32_t>(report.waiting.size()));
  for (const std::string& s : report.waiting) w.string(s.substr(0, kMaxDescription));
  return m;
}

ProbeReport read_probe_report(const Message& message) {
  WireReader r(message.payload);
  ProbeReport out;
  out.context = r.i64("probe_report.context_id");
  out.wave = r.u64("probe_report.wave");
  out.has_context = read_flag(r, "probe_report.has_context");
  out.busy = read_flag(r, "probe_report.busy");
  out.sent = r.u64("probe_report.sent");
  out.received = r.u64("probe_report.received");
  const uint32_t workers = read_count(r, "probe_report.worker_count", kMaxWorkers);
  for (uint32_t i = 0; i < workers; ++i) out.known_workers.push_back(r.u16("probe_report.worker"));
  const uint32_t waiting = read_count(r, "probe_report.waiting_count", kMaxWaiting);
  for (uint32_t i = 0; i < waiting; ++i) out.waiting.push_back(r.string("probe_report.waiting", kMaxDescription));
  r.expect_end("termination_probe_resp");
  return out;
}

Message make_abort_request(ContextId context, const std::string& reason) {
  Message m;
  m.type = MessageType::backward_abort_req;
  WireWriter w(m.payload);
  w.i64(context);
  w.string(reason.substr(0, kMaxReason));
  return m;
}

std::pair<ContextId, std::string> read_abort_request(const Message& message) {
  WireReader r(message.payload);
  const ContextId context = r.i64("abort.context_id");
  std::string reason = r.string("abort.reason", kMaxReason);
  r.expect_end("backward_abort_req");
  return {context, std::move(reason)};
}

bool quiescent(const Wave& wave) {
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
  for (const auto& [worker, report] : later) {
    auto it = earlier.find(worker);
    if (it == earlier.end() || it->second.sent != report.sent || it->second.received != report.received) return false;
  }
  return true;
}

std::string describe_unfinishable(WorkerId self, ContextId context, const Wave& wave) {
  std::string workers, waiting;
  size_t total = 0;
  for (const auto& [worker, report] : wave) {
    workers += (workers.empty() ? "" : ", ") + std::to_string(worker);
    for (const std::string& s : report.waiting) {
      if (++total <= kMaxNamed) waiting += (waiting.empty() ? "" : "; ") + s;
    }
  }
  if (total > kMaxNamed) waiting += "; and " + std::to_string(total - kMaxNamed) + " more";
  return "Error on Node " + std::to_string(self) + ": backward pass of context " + std::to_string(context) +
         " can never finish: every worker taking part (nodes " + workers +
         ") is idle and no gradient is in flight, yet these send functions never received gradients: " +
         (waiting.empty() ? "none reported" : waiting) +
         ". Each is an RPC whose result does not reach the backward's roots (PyTorch's FAST mode waits forever here).";
}

}  // namespace dagsim::dist_autograd
