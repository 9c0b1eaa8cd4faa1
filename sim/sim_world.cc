#include "sim/sim_world.h"

#include <boost/fiber/fiber.hpp>
#include <boost/fiber/operations.hpp>
#include <deque>

#include "core/base/assert.h"
#include "core/fibers/node_fibers.h"
#include "core/runtime/wait.h"
#include "sim/sim_network.h"

namespace dagsim::sim {

using runtime::Delivery;
using runtime::Env;
using runtime::FiberContext;

namespace {
thread_local SimWorld* active_world = nullptr;
// Streams forked from the seed, one per purpose, so adding draws to one leaves the others alone.
enum Stream : uint64_t { kWorldStream = 1, kNetworkStream = 2, kScheduleStream = 3, kNodeStreams = 1000 };
}  // namespace

// Nodes and incarnations ---------------------------------------------------------------------------

class SimWorld::IncarnationSpawner final : public runtime::Spawner {
 public:
  IncarnationSpawner(SimWorld& world, Incarnation& inc) : world_(world), inc_(inc) {}
  void spawn_in(std::shared_ptr<runtime::ScopeState> scope, std::string name, std::function<void()> fn) override {
    world_.spawn_on(inc_, std::move(scope), std::move(name), std::move(fn), false);
  }
  const std::shared_ptr<runtime::ScopeState>& lifetime() const override;

 private:
  SimWorld& world_;
  Incarnation& inc_;
};

// SimTransport: one incarnation's Transport. Sends go to the world's SimNetwork tagged with the
// incarnation (a dead incarnation's late sends are lost); deliveries arrive in its inbox.
class SimWorld::SimTransport final : public runtime::Transport {
 public:
  SimTransport(SimWorld& world, WorkerId self, uint32_t incarnation)
      : world_(world), self_(self), incarnation_(incarnation) {}
  WorkerId self() const override { return self_; }
  using runtime::Transport::send;
  void send(WorkerId target, runtime::Bytes payload, uint64_t padding) override {
    if (closed_) {
      throw errors::channel_closed("send on the closed transport of node " + std::to_string(self_) +
                                   " (incarnation " + std::to_string(incarnation_) + ")");
    }
    world_.network_->send(self_, incarnation_, target, std::move(payload), padding);
  }
  runtime::Channel<Delivery>& inbox() override { return inbox_; }
  // Deliveries to a closed inbox are dropped by SimWorld::deliver (a node that stopped listening).
  void close() override {
    closed_ = true;
    inbox_.close();
  }

 private:
  SimWorld& world_;
  WorkerId self_;
  uint32_t incarnation_;
  bool closed_ = false;
  runtime::Channel<Delivery> inbox_{0, runtime::ChannelThreads::one_thread};  // one OS thread runs the world
};

class SimWorld::TraceLog final : public runtime::Log {
 public:
  TraceLog(SimWorld& world, WorkerId node) : world_(world), node_(node) {}
  void event(std::string_view kind, std::string_view detail) override {
    // Distributed autograd's profile events get a kind of their own (dist_engine.cc).
    if (kind == "autograd") {
      world_.trace_.record(world_.now(), node_, TraceKind::autograd, std::string(detail));
      return;
    }
    std::string text(kind);
    if (!detail.empty()) text.append(" ").append(detail);
    world_.trace_.record(world_.now(), node_, TraceKind::workload, text);
  }

 private:
  SimWorld& world_;
  WorkerId node_;
};

struct SimWorld::Incarnation {
  Incarnation(SimWorld& world, Node& node, uint32_t number);

  Node& node;
  uint32_t number;
  IncarnationSpawner spawner;
  SimTransport transport;
  Prng random;
  TraceLog log;
  Env env;
  fibers::NodeFibers fibers;  // its lifetime, its fibers
};

struct SimWorld::Node {
  Node(SimWorld& world, WorkerId id, std::string name, NodeMain main, Duration skew, int64_t drift)
      : id(id), name(std::move(name)), main(std::move(main)), clock(world.clock_, world.trace_, id, skew, drift) {}

  WorkerId id;
  std::string name;
  NodeMain main;
  NodeClock clock;
  NodeState state = NodeState::not_started;
  uint32_t incarnations = 0;  // how many have started
  std::unique_ptr<Incarnation> current;
  const DeviceSet* devices = nullptr;
  std::vector<std::unique_ptr<Incarnation>> retired;  // dead ones, kept for the world's life
  std::deque<Delivery> held_while_paused;
};

const std::shared_ptr<runtime::ScopeState>& SimWorld::IncarnationSpawner::lifetime() const {
  return inc_.fibers.lifetime();
}

SimWorld::Incarnation::Incarnation(SimWorld& world, Node& node, uint32_t number)
    : node(node), number(number), spawner(world, *this), transport(world, node.id, number),
      random(Prng(world.options_.seed).fork(kNodeStreams + (static_cast<uint64_t>(node.id) << 20) + number)),
      log(world, node.id),
      env{node.id, node.name, node.clock, transport, spawner, random, log, number,
          [&world](WorkerId id) { return id < world.num_nodes() ? world.node_name(id) : "node " + std::to_string(id); }},
      fibers(node.name, node.clock, spawner, world.live_fibers_, world.options_.stack_bytes,
             [&world, &node](const FiberContext& fiber, std::string what) {
               world.trace_.record(world.now(), node.id, TraceKind::fiber_failed, fiber.fiber_name + ": " + what);
               world.failures_.push_back({world.now(), node.name, fiber.fiber_name, std::move(what)});
             }) {}

// SimWorld -------------------------------------------------------------------------------------------

SimWorld::SimWorld(SimOptions options)
    : options_(std::move(options)), scheduler_(fibers::DeterministicScheduler::for_this_thread()),
      trace_(options_.keep_trace_events), world_random_(Prng(options_.seed).fork(kWorldStream)),
      network_random_(Prng(options_.seed).fork(kNetworkStream)) {
  DAGSIM_ASSERT_MSG(active_world == nullptr, "one SimWorld at a time per thread");
  active_world = this;
  network_ = std::make_unique<SimNetwork>(*this, options_.network);
  scheduler_.set_random_order(options_.random_schedule ? std::optional<Prng>(Prng(options_.seed).fork(kScheduleStream))
                                                       : std::nullopt);
}

SimWorld::~SimWorld() {
  shutdown();
  scheduler_.set_random_order(std::nullopt);
  active_world = nullptr;
}

WorkerId SimWorld::add_node(std::string name, NodeMain main) {
  const auto id = static_cast<WorkerId>(nodes_.size());
  const Duration skew{options_.clock_skew_max.count() > 0 ? world_random_.uniform_int(0, options_.clock_skew_max.count())
                                                          : 0};
  const int64_t drift = options_.clock_drift_max_ppm > 0
                            ? world_random_.uniform_int(-options_.clock_drift_max_ppm, options_.clock_drift_max_ppm)
                            : 0;
  nodes_.push_back(std::make_unique<Node>(*this, id, std::move(name), std::move(main), skew, drift));
  return id;
}

SimWorld::Node& SimWorld::node(WorkerId id) {
  DAGSIM_ASSERT_MSG(id < nodes_.size(), "unknown node " + std::to_string(id));
  return *nodes_[id];
}
const SimWorld::Node& SimWorld::node(WorkerId id) const {
  DAGSIM_ASSERT_MSG(id < nodes_.size(), "unknown node " + std::to_string(id));
  return *nodes_[id];
}

const std::string& SimWorld::node_name(WorkerId id) const { return node(id).name; }

std::vector<std::string> SimWorld::node_names() const {
  std::vector<std::string> names;
  for (const auto& n : nodes_) names.push_back(n->name);
  return names;
}

NodeState SimWorld::state(WorkerId id) const { return node(id).state; }

uint32_t SimWorld::incarnation(WorkerId id) const {
  const Node& n = node(id);
  if (n.current) return n.current->number;
  return n.incarnations == 0 ? 0 : n.incarnations - 1;  // the last one to have run
}

Env& SimWorld::env(WorkerId id) {
  Node& n = node(id);
  DAGSIM_ASSERT_MSG(n.current != nullptr, n.name + " is not running");
  return n.current->env;
}

const NodeClock& SimWorld::clock(WorkerId id) const { return node(id).clock; }

void SimWorld::record_fault(FaultEvent event, std::string detail) {
  event.time = now();
  const uint32_t track = (event.kind == FaultEvent::Kind::partition || event.kind == FaultEvent::Kind::heal)
                             ? kWorldTrack
                             : event.node;
  trace_.record(now(), track, TraceKind::fault, detail);
  history_.push_back(std::move(event));
}

void SimWorld::note_connection_failure(WorkerId a, WorkerId b, const std::string& reason) {
  FaultEvent event{FaultEvent::Kind::connection_failed, now(), a, b, 0, {}};
  trace_.record(now(), a, TraceKind::connection, "failed with " + node(b).name + ": " + reason, 0, b);
  history_.push_back(std::move(event));
}

void SimWorld::note_connection_refused(WorkerId a, WorkerId b) {
  history_.push_back(FaultEvent{FaultEvent::Kind::connection_failed, now(), a, b, 0, {}});
}

void SimWorld::set_devices(WorkerId id, const DeviceSet* devices) {
  Node& n = node(id);
  n.devices = devices;
  if (n.current != nullptr) n.current->fibers.set_devices(devices);
}

NodeClock& SimWorld::node_clock(WorkerId id) { return node(id).clock; }

void SimWorld::begin_incarnation(Node& n) {
  DAGSIM_ASSERT(n.current == nullptr);
  n.current = std::make_unique<Incarnation>(*this, n, n.incarnations++);
  n.current->fibers.set_devices(n.devices);
  n.state = NodeState::up;
  if (n.main) {
    Env* env = &n.current->env;
    spawn_on(*n.current, nullptr, "main", [main = n.main, env] { main(*env); }, false);
  }
}

void SimWorld::end_incarnation(Node& n, NodeState new_state) {
  DAGSIM_ASSERT(n.current != nullptr);
  n.state = new_state;
  n.clock.reset();  // a dead process has no deferred timers; its unwinding waits cancel theirs
  n.held_while_paused.clear();
  Incarnation& inc = *n.current;
  inc.fibers.kill();
  // Kept for the world's life, not freed when its fibers end: a `then` continuation armed on
  // this incarnation may still reach its Spawner (which refuses, the node being dead).
  n.retired.push_back(std::move(n.current));
}

void SimWorld::start(WorkerId id) {
  Node& n = node(id);
  DAGSIM_ASSERT_MSG(n.state == NodeState::not_started, n.name + " was already started");
  record_fault({FaultEvent::Kind::start, {}, id, 0, 0, {}}, "start " + n.name);
  begin_incarnation(n);
}

void SimWorld::kill(WorkerId id) {
  Node& n = node(id);
  if (n.current == nullptr) return;  // already down
  record_fault({FaultEvent::Kind::kill, {}, id, 0, 0, {}}, "kill " + n.name);
  end_incarnation(n, NodeState::killed);
  network_->on_kill(id);
}

void SimWorld::crash(WorkerId id) {
  Node& n = node(id);
  if (n.current == nullptr) return;
  record_fault({FaultEvent::Kind::crash, {}, id, 0, 0, {}}, "crash " + n.name);
  end_incarnation(n, NodeState::crashed);
  network_->on_crash(id);
}

void SimWorld::restart(WorkerId id) {
  Node& n = node(id);
  if (n.current != nullptr) kill(id);
  // Connections of the old incarnation (still open if it crashed) are reset by the new one; in
  // the trace, before the new incarnation begins.
  network_->on_restart(id);
  record_fault({FaultEvent::Kind::restart, {}, id, 0, 0, {}}, "restart " + n.name);
  begin_incarnation(n);
}

void SimWorld::pause(WorkerId id) {
  Node& n = node(id);
  if (n.state != NodeState::up) return;
  record_fault({FaultEvent::Kind::pause, {}, id, 0, 0, {}}, "pause " + n.name);
  n.state = NodeState::paused;
  n.clock.pause();
}

void SimWorld::resume(WorkerId id) {
  Node& n = node(id);
  if (n.state != NodeState::paused) return;
  record_fault({FaultEvent::Kind::resume, {}, id, 0, 0, {}}, "resume " + n.name);
  n.state = NodeState::up;
  std::deque<Delivery> held = std::move(n.held_while_paused);
  n.held_while_paused.clear();
  runtime::Channel<Delivery>& inbox = n.current->transport.inbox();
  for (Delivery& d : held) inbox.offer(std::move(d));  // dropped if the node stopped listening
  n.clock.resume();
  network_->on_resume_or_heal();
}

uint64_t SimWorld::partition(std::vector<std::pair<WorkerId, WorkerId>> blocked) {
  const uint64_t id = ++next_partition_;
  std::string detail = "partition #" + std::to_string(id) + ":";
  for (const auto& [from, to] : blocked) detail += " " + node(from).name + "->" + node(to).name;
  record_fault({FaultEvent::Kind::partition, {}, 0, 0, id, blocked}, detail);
  network_->add_partition(id, std::move(blocked));
  return id;
}

void SimWorld::heal(uint64_t partition_id) {
  record_fault({FaultEvent::Kind::heal, {}, 0, 0, partition_id, {}}, "heal #" + std::to_string(partition_id));
  network_->remove_partition(partition_id);
}

void SimWorld::heal_all() {
  record_fault({FaultEvent::Kind::heal, {}, 0, 0, 0, {}}, "heal all");
  network_->remove_all_partitions();
}

runtime::Channel<Delivery>* SimWorld::open_inbox(WorkerId id, uint32_t incarnation) {
  Node& n = node(id);
  if (n.current == nullptr || n.current->number != incarnation) return nullptr;
  runtime::Channel<Delivery>& inbox = n.current->transport.inbox();
  if (inbox.closed()) return nullptr;  // the node stopped listening
  return &inbox;
}

bool SimWorld::paused(WorkerId id) const { return node(id).state == NodeState::paused; }

void SimWorld::hold_while_paused(WorkerId id, Delivery delivery) {
  node(id).held_while_paused.push_back(std::move(delivery));
}

void SimWorld::spawn_foreground(WorkerId id, std::string name, std::function<void()> fn) {
  Node& n = node(id);
  DAGSIM_ASSERT_MSG(n.current != nullptr, "spawn_foreground on " + n.name + ", which is not running");
  spawn_on(*n.current, nullptr, std::move(name), std::move(fn), true);
}

void SimWorld::spawn_on(Incarnation& inc, std::shared_ptr<runtime::ScopeState> scope, std::string name,
                        std::function<void()> fn, bool foreground) {
  std::function<void()> on_end;
  if (foreground) on_end = [this] { --foreground_live_; };
  inc.fibers.spawn(std::move(scope), std::move(name), std::move(fn), std::move(on_end));
  if (foreground) {
    ++foreground_live_;
    foreground_started_ = true;
  }
}

void SimWorld::at(TimePoint t, std::string what, std::function<void()> fn) {
  clock_.call_at(t, [this, what = std::move(what), fn = std::move(fn)] {
    trace_.record(now(), kWorldTrack, TraceKind::workload, what);
    fn();
  });
}

SimWorld::Outcome SimWorld::run(RunLimits limits) {
  DAGSIM_ASSERT(active_world == this);
  // Foreground fibers end a run only if this run has some: a later run (draining what they left
  // in flight, up to stop_at) is not cut short by fibers that ended before it began.
  foreground_started_ = foreground_live_ > 0;
  for (;;) {
    // The driver runs last (scheduler.h): when yield returns, every node fiber is blocked or done.
    boost::this_fiber::yield();
    ++steps_;
    if (progress_ && (steps_ & 0xffff) == 0) progress_(now(), steps_);
    if (foreground_started_ && foreground_live_ == 0) return Outcome::finished;
    check_quiescent();
    if (!clock_.has_timers()) {
      if (foreground_live_ > 0) return Outcome::deadlock;
      if (!limits.stop_at) return Outcome::idle;
      // Nothing more can happen: the workload's end comes with nothing in between.
      const TimePoint end = std::min(*limits.stop_at, limits.max_virtual_time);
      clock_.advance_to(std::max(now(), end));
      return end == *limits.stop_at ? Outcome::finished : Outcome::time_limit;
    }
    const TimePoint next = clock_.next_deadline();
    if (limits.stop_at && next > *limits.stop_at && *limits.stop_at <= limits.max_virtual_time) {
      clock_.advance_to(std::max(now(), *limits.stop_at));
      return Outcome::finished;
    }
    if (next > limits.max_virtual_time) {
      clock_.advance_to(std::max(now(), limits.max_virtual_time));
      return Outcome::time_limit;
    }
    // Every event of this instant, then the fibers they woke: a receiver drains a burst of
    // same-instant deliveries in one wake instead of one driver round trip per message. Events
    // fire in (time, sequence) order either way; only the fibers' view of the batch changes.
    const TimePoint instant = clock_.next_deadline();
    // Fibers that re-arm timers at the current instant forever (a zero-delay retry loop) would
    // never let time reach max_virtual_time: that is a livelock, and the run ends with it.
    rounds_at_instant_ = instant == last_instant_ ? rounds_at_instant_ + 1 : 0;
    last_instant_ = instant;
    if (rounds_at_instant_ >= kMaxRoundsPerInstant) return Outcome::livelock;
    while (clock_.fire_next_at(instant)) continue;
  }
}

void SimWorld::shutdown() {
  for (auto& n : nodes_) {
    if (n->current != nullptr) end_incarnation(*n, NodeState::killed);
  }
  // No timers fire here: killed fibers unwind without time passing (join_killed_fibers asserts).
  fibers::join_killed_fibers(live_fibers_, scheduler_, nullptr, [this] { return stuck_report(); });
}

void SimWorld::check_quiescent() const {
  runtime::assert_quiescent(live_fibers_, [this] { return stuck_report(); });
}

std::string SimWorld::stuck_report() const {
  std::string report;
  for (const auto& n : nodes_) {
    auto describe = [&](const Incarnation& inc) {
      const std::string label = n->name + " (incarnation " + std::to_string(inc.number) + ", " +
                                std::string(inc.fibers.killed() ? "dead" : node_state_name(n->state)) + ")";
      inc.fibers.describe(report, label);
    };
    if (n->current) describe(*n->current);
    for (const auto& inc : n->retired) describe(*inc);
  }
  return report;
}

}  // namespace dagsim::sim
