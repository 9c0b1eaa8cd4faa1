#include "core/fibers/local_runtime.h"

#include <boost/fiber/operations.hpp>

#include "core/fibers/node_fibers.h"

namespace dagsim::fibers {

namespace {
thread_local LocalRuntime* active_runtime = nullptr;
}  // namespace

// Nodes ---------------------------------------------------------------------------------------------

class LocalRuntime::NodeSpawner final : public runtime::Spawner {
 public:
  explicit NodeSpawner(Node& node) : node_(node) {}
  void spawn_in(std::shared_ptr<runtime::ScopeState> scope, std::string name, std::function<void()> fn) override;
  const std::shared_ptr<runtime::ScopeState>& lifetime() const override;

 private:
  Node& node_;
};

class LocalRuntime::LoopbackTransport final : public runtime::Transport {
 public:
  LoopbackTransport(LocalRuntime& runtime, WorkerId self) : runtime_(runtime), self_(self) {}
  WorkerId self() const override { return self_; }
  using runtime::Transport::send;
  void send(WorkerId target, Bytes payload, uint64_t padding) override {
    if (closed_) throw errors::channel_closed("send on the closed transport of node " + std::to_string(self_));
    runtime_.deliver(self_, target, std::move(payload), padding);
  }
  runtime::Channel<runtime::Delivery>& inbox() override { return inbox_; }
  void close() override {
    closed_ = true;
    inbox_.close();
  }

 private:
  LocalRuntime& runtime_;
  WorkerId self_;
  bool closed_ = false;
  runtime::Channel<runtime::Delivery> inbox_{0, runtime::ChannelThreads::one_thread};  // one OS thread runs it all
};

class LocalRuntime::Node {
 public:
  Node(LocalRuntime& runtime, WorkerId id, std::string name)
      : name(std::move(name)), spawner(*this), transport(runtime, id),
        random(Prng(runtime.options_.seed).fork(id)),
        env{id, this->name, runtime.clock_, transport, spawner, random, log, 0, {}},
        fibers(this->name, runtime.clock_, spawner, runtime.live_fibers_, runtime.options_.stack_bytes,
               [&runtime, this](const runtime::FiberContext& fiber, std::string what) {
                 runtime.failures_.push_back({this->name, fiber.fiber_name, std::move(what)});
               }) {
    // Messages name peers as the test named them ("worker1"), as the simulator's and TCP's do.
    env.name_of = [&runtime](WorkerId peer) {
      return peer < runtime.nodes_.size() ? runtime.nodes_[peer]->name : "node " + std::to_string(peer);
    };
  }

  std::string name;
  NodeSpawner spawner;
  LoopbackTransport transport;
  runtime::Random random;
  runtime::MemoryLog log;
  Env env;
  NodeFibers fibers;
};

const std::shared_ptr<runtime::ScopeState>& LocalRuntime::NodeSpawner::lifetime() const {
  return node_.fibers.lifetime();
}

void LocalRuntime::NodeSpawner::spawn_in(std::shared_ptr<runtime::ScopeState> scope, std::string name,
                                         std::function<void()> fn) {
  node_.fibers.spawn(std::move(scope), std::move(name), std::move(fn));
}

// LocalRuntime ------------------------------------------------------------------------------------

LocalRuntime::LocalRuntime(LocalRuntimeOptions options)
    : options_(options), scheduler_(DeterministicScheduler::for_this_thread()) {
  DAGSIM_ASSERT_MSG(active_runtime == nullptr, "one LocalRuntime at a time per thread");
  active_runtime = this;
  scheduler_.set_random_order(options_.random_schedule ? std::optional<Prng>(Prng(options_.seed ^ 0x5eed))
                                                       : std::nullopt);
}

LocalRuntime::~LocalRuntime() {
  for (size_t i = 0; i < nodes_.size(); ++i) kill(static_cast<WorkerId>(i));
  join_killed_fibers(live_fibers_, scheduler_, &clock_, [this] { return stuck_report(); });
  scheduler_.set_random_order(std::nullopt);
  active_runtime = nullptr;
}

Env& LocalRuntime::add_node(std::string name) {
  const auto id = static_cast<WorkerId>(nodes_.size());
  nodes_.push_back(std::make_unique<Node>(*this, id, std::move(name)));
  return nodes_.back()->env;
}

Env& LocalRuntime::env(WorkerId node) {
  DAGSIM_ASSERT(node < nodes_.size());
  return nodes_[node]->env;
}

void LocalRuntime::kill(WorkerId node) {
  DAGSIM_ASSERT(node < nodes_.size());
  nodes_[node]->fibers.kill();
  nodes_[node]->transport.close();
}

void LocalRuntime::set_devices(WorkerId node, const DeviceSet* devices) {
  DAGSIM_ASSERT(node < nodes_.size());
  nodes_[node]->fibers.set_devices(devices);
}

bool LocalRuntime::is_alive(WorkerId node) const {
  DAGSIM_ASSERT(node < nodes_.size());
  return !nodes_[node]->fibers.killed();
}

void LocalRuntime::deliver(WorkerId source, WorkerId target, Bytes payload, uint64_t padding) {
  // A target can come off the wire (an RRef's owner in a fork): an operating error, not an assert.
  if (target >= nodes_.size()) {
    throw errors::invalid_argument("send to node " + std::to_string(target) + ": the cluster has " +
                                   std::to_string(nodes_.size()) + " nodes");
  }
  // Zero latency, but never inline: the message arrives when the driver next moves, in send order.
  // The driver offers, never pushes: an inbox its node closed (its agent shut down) drops the
  // delivery instead of throwing channel_closed into the driver.
  clock_.call_at(clock_.now(), [this, source, target, padding, payload = std::move(payload)]() mutable {
    if (!is_alive(source)) return;  // lost with its sender
    if (!is_alive(target)) {
      nodes_[source]->transport.inbox().offer(
          runtime::Delivery{runtime::Delivery::Kind::peer_failed, target, {}, nodes_[target]->name + " is dead", 0, 0});
      return;
    }
    nodes_[target]->transport.inbox().offer(
        runtime::Delivery{runtime::Delivery::Kind::message, source, std::move(payload), {}, 0, padding});
  });
}

LocalRuntime::Outcome LocalRuntime::run(TimePoint until) {
  DAGSIM_ASSERT(active_runtime == this);
  for (;;) {
    // The driver runs last (scheduler.h): when yield returns, every worker is blocked or done.
    boost::this_fiber::yield();
    if (live_fibers_ == 0) return Outcome::finished;
    check_quiescent();
    if (!clock_.has_timers()) return Outcome::deadlock;
    if (clock_.next_deadline() > until) return Outcome::time_limit;
    clock_.fire_next();
  }
}

void LocalRuntime::check_quiescent() const {
  runtime::assert_quiescent(live_fibers_, [this] { return stuck_report(); });
}

std::string LocalRuntime::stuck_report() const {
  std::string report;
  for (const auto& node : nodes_) node->fibers.describe(report, node->name);
  return report;
}

}  // namespace dagsim::fibers
