#include "sim/trace.h"

// Inlined: fold runs for every event of a run (several per message). Same function, same values
// as the shared library's. Deliberately not core/base/hash.h's dispatched loop: AVX-512 over one
// 2.5 KiB block every 64 events slowed everything else (the heartbeat benchmark by 10%, measured
// against the same build with the SSE2 loop), and XXH3's value does not depend on the loop.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/base/assert.h"

namespace dagsim::sim {

std::string_view trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::send: return "send";
    case TraceKind::deliver: return "deliver";
    case TraceKind::drop: return "drop";
    case TraceKind::hold: return "hold";
    case TraceKind::timer: return "timer";
    case TraceKind::fault: return "fault";
    case TraceKind::autograd: return "autograd";
    case TraceKind::connection: return "connection";
    case TraceKind::workload: return "workload";
    case TraceKind::fiber_failed: return "fiber_failed";
  }
  DAGSIM_UNREACHABLE();
}

void Trace::fold(runtime::TimePoint time, uint32_t node, TraceKind kind, uint64_t digest, uint64_t flow) {
  // Fixed-width words only, so no padding bytes reach the hash.
  uint64_t* record = block_ + block_words_;
  record[0] = static_cast<uint64_t>(time.ns());
  record[1] = node;
  record[2] = static_cast<uint64_t>(kind);
  record[3] = digest;
  record[4] = flow;
  block_words_ += kFoldWords;
  if (block_words_ == kFoldRecords * kFoldWords) {
    hash_ = XXH3_64bits_withSeed(block_, sizeof(block_), hash_);
    block_words_ = 0;
  }
  ++count_;
  ++per_kind_[static_cast<size_t>(kind)];
}

uint64_t Trace::hash() const {
  if (block_words_ == 0) return hash_;
  return XXH3_64bits_withSeed(block_, block_words_ * sizeof(uint64_t), hash_);
}

void Trace::record(runtime::TimePoint time, uint32_t node, TraceKind kind, std::string_view detail,
                   uint64_t flow, uint32_t peer) {
  record_lazy(time, node, kind, XXH3_64bits(detail.data(), detail.size()), flow, peer,
              [detail] { return std::string(detail); });
}

namespace {
// Trace-event timestamps are microseconds; keep nanosecond precision as a fraction.
double to_us(runtime::TimePoint t) { return static_cast<double>(t.ns()) / 1000.0; }
// Track ids: node i is tid i + 1; the world's own track is tid 0.
uint32_t tid_of(uint32_t node) { return node == kWorldTrack ? 0 : node + 1; }
}  // namespace

std::string_view trace_level_name(TraceLevel level) {
  switch (level) {
    case TraceLevel::workload: return "workload";
    case TraceLevel::rpc: return "rpc";
    case TraceLevel::network: return "network";
  }
  DAGSIM_UNREACHABLE();
}

bool parse_trace_level(std::string_view name, TraceLevel& level) {
  for (TraceLevel l : {TraceLevel::workload, TraceLevel::rpc, TraceLevel::network}) {
    if (trace_level_name(l) == name) {
      level = l;
      return true;
    }
  }
  return false;
}

namespace {

// The least level that shows events of `kind`.
TraceLevel level_of(TraceKind kind) {
  switch (kind) {
    case TraceKind::workload:
    case TraceKind::fault:
    case TraceKind::fiber_failed:
      return TraceLevel::workload;
    case TraceKind::send:
    case TraceKind::deliver:
    case TraceKind::drop:
    case TraceKind::connection:
    case TraceKind::autograd:
      return TraceLevel::rpc;
    case TraceKind::hold:
    case TraceKind::timer:
      return TraceLevel::network;
  }
  DAGSIM_UNREACHABLE();
}

// Each node's backward passes as spans: a "pass begins, context C ..." autograd event paired with
// the next "pass ends, context C" of the same node (passes of one context may nest on a node).
std::vector<TraceSpan> backward_passes(const std::vector<TraceEvent>& events) {
  std::map<std::pair<uint32_t, std::string>, std::vector<const TraceEvent*>> open;
  std::vector<TraceSpan> spans;
  auto context_of = [](const std::string& detail, size_t from) {
    const size_t end = detail.find_first_of(" ,", from);
    return detail.substr(from, end == std::string::npos ? std::string::npos : end - from);
  };
  static constexpr std::string_view kBegins = "pass begins, context ";
  static constexpr std::string_view kEnds = "pass ends, context ";
  for (const TraceEvent& e : events) {
    if (e.kind != TraceKind::autograd) continue;
    if (e.detail.rfind(kBegins, 0) == 0) {
      open[{e.node, context_of(e.detail, kBegins.size())}].push_back(&e);
    } else if (e.detail.rfind(kEnds, 0) == 0) {
      auto it = open.find({e.node, context_of(e.detail, kEnds.size())});
      if (it == open.end() || it->second.empty()) continue;
      const TraceEvent* begin = it->second.back();
      it->second.pop_back();
      spans.push_back({e.node, "backward", "backward", begin->time, e.time, begin->detail});
    }
  }
  return spans;
}

}  // namespace

void Trace::write_chrome_json(std::ostream& out, const std::vector<std::string>& node_names, TraceLevel level,
                              const std::vector<TraceSpan>& spans) const {
  DAGSIM_ASSERT_MSG(keep_events_, "write_chrome_json needs a trace that keeps its events");
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "dagsim world"}}}});
  events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "world"}}}});
  for (size_t i = 0; i < node_names.size(); ++i) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 1},
                      {"tid", tid_of(static_cast<uint32_t>(i))},
                      {"args", {{"name", node_names[i]}}}});
  }
  // Spans first, so that in viewers that stack by order they sit above the events they contain.
  std::vector<TraceSpan> all = spans;
  for (TraceSpan& pass : backward_passes(events_)) all.push_back(std::move(pass));
  for (const TraceSpan& span : all) {
    DAGSIM_ASSERT(span.end >= span.begin);
    events.push_back({{"ph", "X"},
                      {"name", span.name},
                      {"cat", span.category},
                      {"ts", to_us(span.begin)},
                      {"dur", std::max(to_us(span.end) - to_us(span.begin), 1.0)},
                      {"pid", 1},
                      {"tid", tid_of(span.node)},
                      {"args", {{"detail", span.detail}}}});
  }
  for (const TraceEvent& event : events_) {
    if (level_of(event.kind) > level) continue;
    const std::string kind(trace_kind_name(event.kind));
    const uint32_t tid = tid_of(event.node);
    // A short complete slice, so flow arrows have a slice to bind to in every viewer.
    // An autograd slice is named after what ran (its detail's first word: "AddBackward",
    // "RecvRpcBackward", "pass"), so a step's backward reads node by node in the viewer.
    const std::string name = event.kind == TraceKind::autograd ? event.detail.substr(0, event.detail.find(' ')) : kind;
    events.push_back({{"ph", "X"},
                      {"name", name},
                      {"cat", kind},
                      {"ts", to_us(event.time)},
                      {"dur", 1},
                      {"pid", 1},
                      {"tid", tid},
                      {"args", {{"detail", event.detail}}}});
    if (event.flow != 0 && (event.kind == TraceKind::send || event.kind == TraceKind::deliver)) {
      json flow = {{"ph", event.kind == TraceKind::send ? "s" : "f"},
                   {"name", "message"},
                   {"cat", "message"},
                   {"id", event.flow},
                   {"ts", to_us(event.time)},
                   {"pid", 1},
                   {"tid", tid}};
      if (event.kind == TraceKind::deliver) flow["bp"] = "e";
      events.push_back(std::move(flow));
    }
  }
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  out << doc.dump() << "\n";
}

}  // namespace dagsim::sim
