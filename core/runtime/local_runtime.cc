#include "core/runtime/local_runtime.h"

#include "core/runtime/fiber_entry.h"
#include "core/runtime/stack_pool.h"

#include <boost/fiber/fiber.hpp>
#include <boost/fiber/operations.hpp>

namespace dagsim::runtime {

namespace {
thread_local LocalRuntime* active_runtime = nullptr;
}  // namespace

// Nodes ---------------------------------------------------------------------------------------------

class LocalRuntime::NodeSpawner final : public Spawner {
 public:
  NodeSpawner(LocalRuntime& runtime, Node& node) : runtime_(runtime), node_(node) {}
  void spawn(std::string name, std::function<void()> fn) override;

 private:
  LocalRuntime& runtime_;
  Node& node_;
};

class LocalRuntime::LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LocalRuntime& runtime, WorkerId self) : runtime_(runtime), self_(self) {}
  WorkerId self() const override { return self_; }
  void send(WorkerId target, Bytes payload) override { runtime_.deliver(self_, target, std::move(payload)); }
  Channel<Delivery>& inbox() override { return inbox_; }

 private:
  LocalRuntime& runtime_;
  WorkerId self_;
  Channel<Delivery> inbox_;
};

class LocalRuntime::Node {
 public:
  Node(LocalRuntime& runtime, WorkerId id, std::string name)
      : name(std::move(name)), spawner(runtime, *this), transport(runtime, id),
        random(Prng(runtime.options_.seed).fork(id)),
        env{id, this->name, runtime.clock_, transport, spawner, random, log, 0} {}

  std::string name;
  NodeLifetime lifetime;
  NodeSpawner spawner;
  LoopbackTransport transport;
  Random random;
  MemoryLog log;
  Env env;
  std::list<FiberContext> fibers;  // live fibers; list nodes keep their addresses
};

void LocalRuntime::NodeSpawner::spawn(std::string name, std::function<void()> fn) {
  if (node_.lifetime.killed()) throw errors::node_killed(node_.name + ": cannot spawn " + name);
  auto context = node_.fibers.insert(node_.fibers.end(),
                                     FiberContext{node_.name, std::move(name), &node_.lifetime,
                                                  &runtime_.clock_, this, nullptr});
  ++runtime_.live_fibers_;
  LocalRuntime& runtime = runtime_;
  Node& node = node_;
  boost::fibers::fiber fiber(
      std::allocator_arg, PooledStack(StackPool::for_this_thread(runtime.options_.stack_bytes)),
      [&runtime, &node, context, fn = std::move(fn)]() mutable {
        if (auto failure = run_fiber_body(*context, fn)) {
          runtime.failures_.push_back({node.name, context->fiber_name, std::move(*failure)});
        }
        node.fibers.erase(context);
        --runtime.live_fibers_;
      });
  fiber.detach();
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
  // Killed fibers unwind at their blocking points; a fiber that swallows node_killed and blocks
  // again would never end, which is a bug in that fiber.
  while (live_fibers_ > 0) {
    const size_t before = live_fibers_;
    boost::this_fiber::yield();
    if (live_fibers_ == before && scheduler_.ready_workers() == 0) {
      check_quiescent();
      if (!clock_.has_timers()) {
        DAGSIM_ASSERT_MSG(false, "fibers survived their node's death:\n" + stuck_report());
      }
      clock_.fire_next();
    }
  }
  boost::this_fiber::yield();  // let the dispatcher free terminated fibers
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
  nodes_[node]->lifetime.kill();
  nodes_[node]->transport.inbox().close();
}

bool LocalRuntime::is_alive(WorkerId node) const {
  DAGSIM_ASSERT(node < nodes_.size());
  return !nodes_[node]->lifetime.killed();
}

void LocalRuntime::deliver(WorkerId source, WorkerId target, Bytes payload) {
  DAGSIM_ASSERT(target < nodes_.size());
  // Zero latency, but never inline: the message arrives when the driver next moves, in send order.
  clock_.call_at(clock_.now(), [this, source, target, payload = std::move(payload)]() mutable {
    if (!is_alive(source)) return;  // lost with its sender
    if (!is_alive(target)) {
      nodes_[source]->transport.inbox().push(
          Delivery{Delivery::Kind::peer_failed, target, {}, nodes_[target]->name + " is dead", 0});
      return;
    }
    nodes_[target]->transport.inbox().push(Delivery{Delivery::Kind::message, source, std::move(payload), {}, 0});
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
  assert_quiescent(live_fibers_, [this] { return stuck_report(); });
}

std::string LocalRuntime::stuck_report() const {
  std::string report;
  for (const auto& node : nodes_) {
    for (const FiberContext& fiber : node->fibers) {
      report += "  node " + node->name + ", fiber " + fiber.fiber_name + ": waiting on " +
                (fiber.waiting_on ? fiber.waiting_on : "nothing (ready to run)") + "\n";
    }
  }
  return report;
}

}  // namespace dagsim::runtime
