#include "net/etcd/real_runtime_harness.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "core/base/error.h"
#include "core/runtime/event.h"
#include "net/io_scheduler.h"
#include "net/process_node.h"

namespace dagsim::net::etcd {

namespace {

// A node without peers: every send fails at once, nothing ever arrives.
class NoTransport final : public runtime::Transport {
 public:
  explicit NoTransport(WorkerId self) : self_(self) {}
  WorkerId self() const override { return self_; }
  void send(WorkerId target, runtime::Bytes, uint64_t) override {
    throw errors::connection_failed("node " + std::to_string(self_) + " has no transport (a test on the real runtime) to reach node " +
                                    std::to_string(target));
  }
  runtime::Channel<runtime::Delivery>& inbox() override { return inbox_; }
  void close() override { inbox_.close(); }

 private:
  WorkerId self_;
  runtime::Channel<runtime::Delivery> inbox_;
};

void run_here(size_t count, runtime::Duration limit, const std::function<void(RealRuntime&)>& body) {
  boost::asio::io_context& io = IoScheduler::for_this_thread().io();
  RealClock clock(io);
  runtime::MemoryLog log;
  std::vector<std::unique_ptr<NoTransport>> transports;
  std::vector<std::unique_ptr<ProcessNode>> nodes;
  RealRuntime rt{io, clock, {}};
  for (size_t i = 0; i < count; ++i) {
    const auto id = static_cast<WorkerId>(i);
    transports.push_back(std::make_unique<NoTransport>(id));
    nodes.push_back(std::make_unique<ProcessNode>(
        "node" + std::to_string(i), id, 0, 1, clock, *transports.back(), log,
        [](const runtime::FiberContext& fiber, std::string what) {
          ADD_FAILURE() << "fiber " << fiber.fiber_name << " on " << fiber.node_name << " failed: " << what;
        }));
    rt.nodes.push_back(&nodes.back()->env());
  }
  bool done = false;
  nodes[0]->env().spawner.spawn("body", [&] {
    // Set on the way out too, so a failing body (reported by the node) still ends the wait.
    struct Done {
      bool& flag;
      ~Done() { flag = true; }
    } mark{done};
    body(rt);
  });
  if (!wait_on_main(clock, [&] { return done; }, clock.now() + limit, std::chrono::milliseconds(2))) {
    ADD_FAILURE() << "the body did not end within " << std::chrono::duration_cast<std::chrono::seconds>(limit).count() << " s";
  }
  for (auto& node : nodes) {
    if (!node->kill_and_join(std::chrono::seconds(10))) {
      std::string report;
      node->fibers().describe(report, node->env().name);
      ADD_FAILURE() << "fibers did not unwind:\n" << report;
    }
  }
}

}  // namespace

void on_every_node(RealRuntime& rt, const std::function<void(size_t)>& fn) {
  size_t left = rt.nodes.size();
  runtime::Event all_done;
  for (size_t i = 0; i < rt.nodes.size(); ++i) {
    rt.nodes[i]->spawner.spawn("node" + std::to_string(i), [&, i] {
      // Counted even when fn throws (the harness reports the fiber's failure).
      struct Done {
        size_t& left;
        runtime::Event& all_done;
        ~Done() {
          if (--left == 0) all_done.set();
        }
      } done{left, all_done};
      fn(i);
    });
  }
  all_done.wait();
}

void run_on_real_runtime(size_t nodes, runtime::Duration limit, const std::function<void(RealRuntime&)>& body) {
  std::thread thread([&] { run_here(nodes, limit, body); });
  thread.join();
}

}  // namespace dagsim::net::etcd
