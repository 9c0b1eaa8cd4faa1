// What the rendezvous handler's and the elastic agent's unit tests share: a LocalRuntime cluster
// with node 0 hosting the built-in store and nodes 1..n each with a RendezvousHandler on its own
// StoreClient, and helpers to call into it at given virtual times. Tests only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fibers/local_runtime.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"

namespace dagsim::rendezvous::testing {

using namespace std::chrono_literals;
using fibers::LocalRuntime;

inline TimePoint at(Duration d) { return TimePoint{} + d; }

inline RendezvousSettings job(uint32_t min_nodes, uint32_t max_nodes) {
  RendezvousSettings s;
  s.run_id = "job";
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  return s;
}

// What one call of next_rendezvous gave, and when.
struct JoinResult {
  std::optional<RendezvousInfo> info;
  std::optional<ErrorCode> error;
  std::string what;
  std::optional<TimePoint> done_at;
};

// A store node and n participants on one LocalRuntime.
struct Cluster {
  // Every node dies and its fibers unwind (releasing what they hold) before the handlers and
  // agents they are blocked in go away.
  ~Cluster() {
    for (WorkerId i = 0; i < rt_.num_nodes(); ++i) {
      if (rt_.is_alive(i)) rt_.kill(i);
    }
    rt_.run();
  }

  // Node 0 is the store; nodes 1..n are participants.
  void start(int n, const RendezvousSettings& settings, RendezvousHandlerOptions options = {}) {
    registry_ = rpc::FunctionRegistry::with_builtins();
    for (int i = 0; i <= n; ++i) {
      runtime::Env& env = rt_.add_node(i == 0 ? "store" : "worker" + std::to_string(i));
      agents_.push_back(std::make_unique<rpc::RpcAgent>(env, registry_));
      if (i == 0) service_ = std::make_unique<store::StoreService>(*agents_.back());
      agents_.back()->start();
      if (i == 0) continue;
      clients_.push_back(std::make_unique<store::StoreClient>(*agents_.back(), 0));
      clients_.back()->set_timeout(10s);
      NodeDesc node;
      node.addr = env.name;
      node.pid = env.incarnation;
      handlers_.push_back(std::make_unique<RendezvousHandler>(env, *clients_.back(), settings, node, options));
    }
    results_.resize(static_cast<size_t>(n) + 1);
  }

  RendezvousHandler& handler(int i) { return *handlers_[static_cast<size_t>(i - 1)]; }
  JoinResult& result(int i) { return results_[static_cast<size_t>(i)]; }

  // Node i calls next_rendezvous at virtual time `when`; its outcome lands in result(i).
  void join_at(int i, TimePoint when) {
    rt_.env(static_cast<WorkerId>(i)).spawner.spawn("next_rendezvous", [this, i, when] {
      rt_.env(static_cast<WorkerId>(i)).clock.sleep_until(when);
      JoinResult& r = result(i);
      r = {};
      try {
        r.info = handler(i).next_rendezvous();
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        r.error = e.code();
        r.what = e.what();
      }
      r.done_at = rt_.now();
    });
  }
  // Runs `fn` on node i at virtual time `when` (the runtime runs on to `until` meanwhile).
  template <typename F>
  void at_time(int i, TimePoint when, F fn) {
    rt_.env(static_cast<WorkerId>(i)).spawner.spawn("call", [this, i, when, fn] {
      rt_.env(static_cast<WorkerId>(i)).clock.sleep_until(when);
      fn();
    });
  }
  void run_until(TimePoint t) { EXPECT_NE(rt_.run(t), LocalRuntime::Outcome::deadlock) << rt_.stuck_report(); }
  TimePoint latest_done(int n) {
    TimePoint latest{};
    for (int i = 1; i <= n; ++i) {
      EXPECT_TRUE(result(i).done_at.has_value()) << "worker" << i << " never returned";
      if (result(i).done_at) latest = std::max(latest, *result(i).done_at);
    }
    return latest;
  }

  LocalRuntime rt_;
  rpc::FunctionRegistry registry_;
  std::vector<std::unique_ptr<rpc::RpcAgent>> agents_;
  std::unique_ptr<store::StoreService> service_;
  std::vector<std::unique_ptr<store::StoreClient>> clients_;
  std::vector<std::unique_ptr<RendezvousHandler>> handlers_;
  std::vector<JoinResult> results_;
};

}  // namespace dagsim::rendezvous::testing
