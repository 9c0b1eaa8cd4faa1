// RRef forks under faults (rref.h, rref_forks.cc): an RRef made by worker1 on its owner worker0
// travels along generated chains of calls (worker1 -> a -> b -> ..., any worker, the owner and
// the caller itself included), each hop a fork of the last, each holder keeping it a while and
// reading it, while workers other than the owner are killed and restarted and links partitioned.
//
// Safety, under kills and partitions: whenever a holder has a handle, the owner counts that very
// fork, every read gives the value, and the owner never opens a value again once it dropped it; a
// hop fails only because a worker or a link is gone (connection_failed, timed_out), and without
// faults never.
// No leaks: once every chain ends, the creator lets go and the faults are over, the owner keeps no
// value and no worker still vouches for a fork (every restarted life says hello to the owner, and
// lost deletes are sent again). Under kills alone the owner keeps nothing at all; under
// partitions an empty slot may stay where the creator's remote call itself was lost.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "conformance/rpc_world.h"
#include "core/tensor/ops.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using runtime::TimePoint;

constexpr int kWorkers = 4;  // worker0 owns, worker1 creates
constexpr double kValue = 42;

struct Fault {
  int at_ms = 0;
  bool partition = false;  // else kill and restart `a`
  WorkerId a = 1, b = 0;
  int lasts_ms = 0;
};

struct Plan {
  std::vector<std::vector<WorkerId>> chains;  // the hops after worker1
  int hold_ms = 0;
  // Each sender lets go of its handle as soon as the call is sent (the fork's parent reference
  // alone keeps the value until the child is counted), instead of holding it until the call ends.
  bool let_go = false;
  std::vector<Fault> faults;
};

rc::Gen<Plan> plan_gen(bool partitions) {
  using namespace rc;
  auto worker = gen::inRange<int>(0, kWorkers);
  auto chain = gen::map(gen::container<std::vector<int>>(*gen::inRange<size_t>(1, 5), worker), [](std::vector<int> c) {
    return std::vector<WorkerId>(c.begin(), c.end());
  });
  auto fault = gen::build<Fault>(gen::set(&Fault::at_ms, gen::inRange(0, 80)),
                                 gen::set(&Fault::partition, partitions ? gen::arbitrary<bool>() : gen::just(false)),
                                 gen::set(&Fault::a, gen::map(gen::inRange(1, kWorkers), [](int w) { return WorkerId(w); })),
                                 gen::set(&Fault::b, gen::map(gen::inRange(0, kWorkers), [](int w) { return WorkerId(w); })),
                                 gen::set(&Fault::lasts_ms, gen::inRange(1, 60)));
  return gen::build<Plan>(gen::set(&Plan::chains, gen::container<std::vector<std::vector<WorkerId>>>(*gen::inRange<size_t>(1, 5), chain)),
                          gen::set(&Plan::hold_ms, gen::inRange(0, 30)), gen::set(&Plan::let_go),
                          gen::set(&Plan::faults, gen::container<std::vector<Fault>>(*gen::inRange<size_t>(0, 7), fault)));
}

std::string hops_text(const std::vector<WorkerId>& hops, size_t from) {
  std::string text;
  for (size_t i = from; i < hops.size(); ++i) text += (text.empty() ? "" : ",") + std::to_string(hops[i]);
  return text;
}

std::vector<WorkerId> parse_hops(const std::string& text) {
  std::vector<WorkerId> hops;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    hops.push_back(static_cast<WorkerId>(std::stoi(text.substr(at, comma - at))));
    at = comma + 1;
  }
  return hops;
}

// An error a hop may end with when faults were injected: a worker or a link is gone. Without
// faults, every hop and every read succeeds.
bool allowed(const Plan& plan, const Error& e) {
  return !plan.faults.empty() && (e.code() == ErrorCode::connection_failed || e.code() == ErrorCode::timed_out);
}

struct Outcome {
  std::vector<std::string> violations;
  size_t reads = 0, failed_hops = 0;
  size_t owned_at_end = 0, values_at_end = 0, children_at_end = 0;
  std::string owner_at_end;
};

Outcome run_plan(const Plan& plan, uint64_t seed) {
  Outcome out;
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  RpcWorld* world = nullptr;
  const auto check = [&](rpc::RpcAgent& me, const rpc::RRef& h, const char* when) {
    if (!world->agent(0).counts_fork(h.id(), h.fork_id())) {
      out.violations.push_back("worker" + std::to_string(me.self()) + " holds fork " + std::to_string(h.fork_id()) +
                               " of RRef " + std::to_string(h.id()) + " " + when + ", but its owner does not count it");
    }
  };
  registry.add("value", [](rpc::CallContext&, const rpc::CallArgs&) { return std::vector<Tensor>{from_values({1}, {kValue})}; });
  registry.add("relay", [&](rpc::CallContext& c, const rpc::CallArgs& a) {
    rpc::RpcAgent& me = c.agent();
    const rpc::RRef& h = a.rrefs.at(0);
    check(me, h, "on arrival");
    me.env().clock.sleep(std::chrono::milliseconds(a.integer("relay", "hold_ms")));
    check(me, h, "after holding it");
    try {
      const double v = h.to_here(200ms).at(0).item();
      ++out.reads;
      if (v != kValue) out.violations.push_back("worker" + std::to_string(me.self()) + " read " + std::to_string(v));
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (!allowed(plan, e)) out.violations.push_back("worker" + std::to_string(me.self()) + " read: " + e.what());
    }
    const std::vector<WorkerId> rest = parse_hops(a.text("relay", "hops"));
    if (!rest.empty()) {
      rpc::CallArgs next{{}, {}, {h}};
      next.strings["hops"] = hops_text(rest, 1);
      next.ints["hold_ms"] = a.integer("relay", "hold_ms");
      next.ints["let_go"] = a.integer("relay", "let_go");
      if (a.integer("relay", "let_go") != 0) {
        me.rpc_async(rest[0], "relay", next, 2s);  // the next hop's outcome is its own
        return std::vector<Tensor>{};             // and this handle goes now
      }
      me.rpc_sync(rest[0], "relay", next, 2s);
    }
    check(me, h, "after passing it on");
    return std::vector<Tensor>{};
  });
  sim::SimOptions options = latency(100us, 5ms, seed);
  options.random_schedule = true;
  options.keep_trace_events = true;
  options.network.connection_timeout = 30ms;  // partitions (up to 60 ms) break connections: messages are lost
  // Every life says hello to the owner, as any worker of a job soon does: the owner learns of it.
  RpcWorld w(options, kWorkers, std::move(registry), [](WorkerId self, rpc::RpcAgent& agent) {
    if (self == 0) return;
    agent.env().spawner.spawn("hello", [&agent] {
      for (;;) {
        try {
          agent.rpc_sync(0, "neg", {{from_values({1}, {1.0})}, {}}, 100ms);
          return;
        } catch (const Error& e) {
          runtime::rethrow_if_unwinding(e);
          agent.env().clock.sleep(100ms);
        }
      }
    });
  });
  world = &w;
  w.world.spawn_foreground(1, "creator", [&] {
    // The random schedule may run this before the node's main fiber has made its agent.
    while (w.current[1] == nullptr || w.current[0] == nullptr) w.world.env(1).clock.sleep(1ms);
    rpc::RpcAgent& creator = w.agent(1);
    std::optional<rpc::RRef> r = creator.remote(0, "value", {});
    std::vector<runtime::Future<std::vector<Tensor>>> chains;
    for (const std::vector<WorkerId>& hops : plan.chains) {
      rpc::CallArgs args{{}, {}, {*r}};
      args.strings["hops"] = hops_text(hops, 1);
      args.ints["hold_ms"] = plan.hold_ms;
      args.ints["let_go"] = plan.let_go ? 1 : 0;
      chains.push_back(creator.rpc_async(hops[0], "relay", args, 5s));
    }
    if (plan.let_go) r.reset();
    for (auto& chain : chains) {
      try {
        chain.get();
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        ++out.failed_hops;
        // A hop's error comes back through every caller: its code is the first failure's.
        if (!allowed(plan, e)) out.violations.push_back(std::string("a chain ended with ") + e.what());
      }
    }
  });
  for (const Fault& f : plan.faults) {
    const TimePoint at{std::chrono::milliseconds(f.at_ms)};
    const TimePoint until = at + std::chrono::milliseconds(f.lasts_ms);
    if (f.partition) {
      w.world.at(at, "partition", [&w, f, until] {
        const uint64_t id = w.world.partition({{f.a, f.b}, {f.b, f.a}});
        w.world.at(until, "heal", [&w, id] { w.world.heal(id); });
      });
    } else {
      w.world.at(at, "kill", [&w, f] { w.world.kill(f.a); });
      w.world.at(until, "restart", [&w, f] { w.world.restart(f.a); });
    }
  }
  w.world.run({.max_virtual_time = TimePoint{60s}});
  // Let the last deletes (retried for about 30 s) and accepts land, every fault being over.
  w.world.run({.stop_at = w.world.now() + 60s});
  // The owner never opens a value again once it dropped it: a fork that outlived the value would.
  std::set<std::string> dropped;
  for (const sim::TraceEvent& e : w.world.trace().events()) {
    if (e.node != 0 || e.kind != sim::TraceKind::workload) continue;
    if (e.detail.rfind("rref.dropped ", 0) == 0) dropped.insert(e.detail.substr(13));
    if (e.detail.rfind("rref.opened ", 0) == 0 && dropped.count(e.detail.substr(12)) != 0) {
      out.violations.push_back("the owner opened RRef " + e.detail.substr(12) + " again after dropping it");
    }
  }
  out.owned_at_end = w.agent(0).owned_rrefs();
  out.values_at_end = w.agent(0).owned_values();
  out.owner_at_end = w.agent(0).owned_report();
  for (int i = 0; i < kWorkers; ++i) out.children_at_end += w.agent(i).pending_children();
  return out;
}

std::string describe(const Plan& plan) {
  std::string text = "hold " + std::to_string(plan.hold_ms) + " ms" + (plan.let_go ? ", letting go" : "") + "; chains from worker1:";
  for (const auto& chain : plan.chains) text += " [" + hops_text(chain, 0) + "]";
  for (const Fault& f : plan.faults) {
    text += "; at " + std::to_string(f.at_ms) + " ms " +
            (f.partition ? "partition " + std::to_string(f.a) + "|" + std::to_string(f.b) : "kill " + std::to_string(f.a)) +
            " for " + std::to_string(f.lasts_ms) + " ms";
  }
  return text;
}

std::string report(const Outcome& out) {
  std::string text;
  for (const std::string& v : out.violations) text += "  " + v + "\n";
  return text;
}

RC_GTEST_PROP(RRefForkProperties, TheOwnerNeverDropsAValueAForkStillHoldsUnderKillsAndPartitions, ()) {
  const Plan plan = *plan_gen(true);
  const uint64_t seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  const Outcome out = run_plan(plan, seed);
  RC_LOG() << describe(plan) << "\nseed " << seed << "\n" << report(out) << "values " << out.values_at_end << ", children "
           << out.children_at_end << "\n" << out.owner_at_end;
  RC_ASSERT(out.violations.empty());
  RC_ASSERT(out.values_at_end == 0u);
  RC_ASSERT(out.children_at_end == 0u);
  RC_CLASSIFY(out.failed_hops > 0, "some chain failed");
  RC_TAG(out.reads == 0 ? "no reads" : out.reads < 5 ? "1-4 reads" : "5+ reads");
}

RC_GTEST_PROP(RRefForkProperties, NothingLeaksOnceEveryForkIsGoneUnderKills, ()) {
  const Plan plan = *plan_gen(false);
  const uint64_t seed = *rc::gen::noShrink(rc::gen::arbitrary<uint64_t>());
  const Outcome out = run_plan(plan, seed);
  RC_LOG() << describe(plan) << "\nseed " << seed << "\n" << report(out) << "owned " << out.owned_at_end << ", children " << out.children_at_end << "\n" << out.owner_at_end;
  RC_ASSERT(out.violations.empty());
  RC_ASSERT(out.owned_at_end == 0u);
  RC_ASSERT(out.children_at_end == 0u);
  RC_CLASSIFY(!plan.faults.empty(), "with kills");
  RC_TAG(out.reads == 0 ? "no reads" : out.reads < 5 ? "1-4 reads" : "5+ reads");
}

// The property's case for the delete retries (7aeffdf), fixed here because RapidCheck's default
// 100 cases in CI find it only now and then (it took 98 with RC seed 1, 495 when first found):
// worker1's delete of its fork goes into a partition that outlasts the connection timeout, is
// lost, and sent once only would leave the owner holding the value for ever. Fails with the retry
// in RpcAgent::send_user_delete removed.
TEST(RRefForkRegressions, ADeleteLostToAPartitionIsSentAgainAndTheOwnerLetsGo) {
  Plan plan;
  plan.chains = {{1, 0}};
  plan.hold_ms = 14;
  plan.faults = {Fault{0, false, 2, 0, 1}, Fault{51, true, 1, 0, 32}};
  const Outcome out = run_plan(plan, 425323121530920125ull);
  EXPECT_TRUE(out.violations.empty()) << report(out);
  EXPECT_EQ(out.values_at_end, 0u) << out.owner_at_end;
  EXPECT_EQ(out.children_at_end, 0u);
}

}  // namespace
}  // namespace dagsim::conformance
