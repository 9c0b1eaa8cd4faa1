// Termination detection for a distributed backward pass: how dagsim tells "still working" from
// "can never finish" (beyond PyTorch, whose FAST mode waits forever when an RPC's result does not
// reach the roots: shared/reference/dist_autograd.md, "Known limitations").
//
// Every worker counts, per context, the gradient messages it sent and received (requests and
// their replies). The node that called backward runs waves once its pass has been idle for a
// while: it probes every worker of the context (its known workers, and theirs, transitively) for
// those counts, whether its pass has work ready, and which of its send functions are still
// waiting for gradients. Two consecutive complete waves in which every worker is idle, every
// worker's counts are unchanged, and the totals balance (sent == received) prove the system
// quiescent: every wave-1 reading precedes every wave-2 reading, nothing happened on any worker
// in between, and no message was in flight at the instant between the waves, so nothing can ever
// wake a pass again (Mattern's double-counting method). The pass then fails on every worker with
// an error naming the send functions that never received gradients: the unused RPCs.
//
// It is only messages and counters, so it works the same over the simulator and over TCP; the
// backward timeout stays as the last safety net (a partitioned worker stops waves completing).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/dist_autograd/context.h"
#include "core/rpc/message.h"
#include "core/rpc/wire.h"

namespace dagsim::dist_autograd {

// Bounds on what a report may claim, so a corrupt one cannot make us allocate without limit.
inline constexpr uint32_t kMaxWorkers = 1u << 16;
inline constexpr uint32_t kMaxWaiting = 1u << 16;
inline constexpr size_t kMaxDescription = 4096;
inline constexpr size_t kMaxReason = 1 << 20;

// termination_probe_req: a wave's probe of one worker.
struct ProbeRequest {
  static constexpr const char* kName = "termination_probe_req";
  ContextId context = 0;
  uint64_t wave = 0;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("probe.context_id", m.context);
    io.num("probe.wave", m.wave);
  }
};

// One worker's answer to one wave's probe (the reply's payload).
struct ProbeReport {
  static constexpr const char* kName = "termination_probe_resp";
  ContextId context = 0;
  uint64_t wave = 0;
  bool has_context = false;  // false: the worker does not know the context (released, or never)
  bool busy = false;         // its pass of the context has work ready or running
  uint64_t sent = 0;         // gradient messages of the context sent / received by the worker
  uint64_t received = 0;
  std::vector<WorkerId> known_workers = {};
  // Send functions of the context on the worker that have received no gradients in this backward,
  // described for people ("'out' (autograd message id N) on node W"), each at most
  // kMaxDescription bytes (clip_description).
  std::vector<std::string> waiting = {};

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("probe_report.context_id", m.context);
    io.num("probe_report.wave", m.wave);
    io.num("probe_report.has_context", m.has_context);
    io.num("probe_report.busy", m.busy);
    io.num("probe_report.sent", m.sent);
    io.num("probe_report.received", m.received);
    io.list("probe_report.known_workers", m.known_workers, kMaxWorkers,
            [&](auto& w) { io.num("probe_report.worker", w); });
    io.list("probe_report.waiting", m.waiting, kMaxWaiting,
            [&](auto& s) { io.str("probe_report.waiting", s, kMaxDescription); });
  }
};

// backward_abort_req: fail a context's pass on a worker, with the reason (at most kMaxReason).
struct AbortRequest {
  static constexpr const char* kName = "backward_abort_req";
  ContextId context = 0;
  std::string reason;

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("abort.context_id", m.context);
    io.str("abort.reason", m.reason, kMaxReason);
  }
};

// `text` cut to at most `max` bytes, so it fits its field.
std::string clip(std::string text, size_t max);

// One complete wave: every worker of the context reached, by worker.
using Wave = std::map<WorkerId, ProbeReport>;

// Every worker knows the context and is idle, and the totals balance.
bool quiescent(const Wave& wave);
// `later`, begun after `earlier` completed, proves the backward can make no more progress: both
// are quiescent over the same workers with the same counts on every worker.
bool proves_termination(const Wave& earlier, const Wave& later);

// The error text for a backward that can never finish, naming what is still waiting.
std::string describe_unfinishable(WorkerId self, ContextId context, const Wave& wave);

}  // namespace dagsim::dist_autograd
