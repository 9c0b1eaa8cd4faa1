// Simulator throughput: how much simulated cluster one core drives per wall second.
//   BM_SimAllToAll/64: 64 nodes each send 16 rounds of 16-byte messages to every other node
//     (64 * 63 * 16 = 64,512 messages), constant 1 µs latency; messages_per_s is deliveries per
//     wall second of world.run() (send, timer, trace hash, inbox push, receiver wake). Aim
//     (issue): >= 1,000,000. The KeepTrace variant also keeps every trace event (Chrome output).
//   BM_SimGrowth/nodes:N: N nodes (4 .. 4096) each send and receive 256 messages to and from at
//     most 16 peers: the same work per node, so msgs_per_s shows how the rate holds as worlds grow.
//   BM_FiberSwitch: two fibers of one node yield to each other; ns_per_switch is one
//     DeterministicScheduler switch (items_per_second = switches/s).
//   BM_FiberPingPong{Event,Channel}: a round trip through two runtime::Events (set/wait/reset) or
//     two Channels; ns_per_wake is one blocked fiber woken (block_until + WaitGuard + switch).
//   BM_HeartbeatVirtualMinutes: 3 nodes heartbeat a monitor every 100 ms over 50..500 µs links for
//     10 virtual minutes; virtual_s_per_wall_s is the speed-up over real time. Aim: >= 600.
// Every benchmark builds its SimWorld inside the iteration (one world per thread at a time) and
// times only world.run() with a steady clock (UseManualTime): world setup and teardown (fiber
// stacks, node kill and unwind) are excluded, so the rates are those of the running simulator.
#include <benchmark/benchmark.h>

#include <boost/fiber/operations.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/event.h"
#include "sim/sim_network.h"
#include "sim/sim_world.h"

namespace dagsim::sim {
namespace {

using namespace std::chrono_literals;
using runtime::Env;
using Wall = std::chrono::steady_clock;

// Runs the world to completion and returns the wall seconds it took; also reports it to the
// benchmark (manual time) and fails the benchmark if the run did not end as expected.
double timed_run(benchmark::State& state, SimWorld& world, RunLimits limits, SimWorld::Outcome expected) {
  const auto start = Wall::now();
  const SimWorld::Outcome outcome = world.run(limits);
  const double seconds = std::chrono::duration<double>(Wall::now() - start).count();
  state.SetIterationTime(seconds);
  if (outcome != expected) state.SkipWithError("the world ended with an unexpected outcome");
  if (!world.failures().empty()) state.SkipWithError(("a fiber failed: " + world.failures().front().what).c_str());
  return seconds;
}

// ---- 1. All-to-all messaging ----------------------------------------------------------------

constexpr int kRounds = 16;
constexpr size_t kPayloadBytes = 16;

// One messaging world: `nodes` nodes each run `sender`, and a foreground receiver on each counts
// until `per_node` messages arrived (so run() returns once every node got everything). Returns
// the messages delivered, or 0 after failing the benchmark when any went missing.
uint64_t run_messaging(benchmark::State& state, WorkerId nodes, uint64_t per_node, bool keep_trace_events,
                       const std::function<void(Env&)>& sender) {
  SimOptions options;
  options.network.latency = LatencyModel::constant(1us);  // 1 µs: virtual time moves each round
  options.keep_trace_events = keep_trace_events;
  SimWorld world(options);
  std::vector<uint64_t> received(nodes, 0);
  for (WorkerId i = 0; i < nodes; ++i) {
    world.add_node("n" + std::to_string(i), sender);
    world.start(i);
    Env* env = &world.env(i);
    world.spawn_foreground(i, "receiver", [env, per_node, count = &received[i]] {
      while (*count < per_node) {
        runtime::Delivery d = env->transport.inbox().pop();
        benchmark::DoNotOptimize(d.payload.data());
        if (d.kind == runtime::Delivery::Kind::message) ++*count;
      }
    });
  }
  timed_run(state, world, {}, SimWorld::Outcome::finished);
  if (state.error_occurred()) return 0;
  uint64_t delivered = 0;
  for (uint64_t r : received) delivered += r;
  if (delivered != per_node * nodes || world.network().stats().delivered != delivered) {
    state.SkipWithError("not every message was delivered");
    return 0;
  }
  return delivered;
}

void all_to_all(benchmark::State& state, bool keep_trace_events) {
  const auto nodes = static_cast<WorkerId>(state.range(0));
  const uint64_t per_node = static_cast<uint64_t>(nodes - 1) * kRounds;  // each node receives this many
  uint64_t delivered_total = 0;
  for (auto _ : state) {
    // One round = one message to every peer, then 1 µs of virtual time.
    const uint64_t delivered = run_messaging(state, nodes, per_node, keep_trace_events, [nodes](Env& env) {
      for (int round = 0; round < kRounds; ++round) {
        for (WorkerId peer = 0; peer < nodes; ++peer) {
          if (peer != env.self) env.transport.send(peer, runtime::Bytes(kPayloadBytes, uint8_t(round)));
        }
        env.clock.sleep(1us);
      }
    });
    if (delivered == 0) break;
    delivered_total += delivered;
  }
  state.counters["messages_per_s"] =
      benchmark::Counter(static_cast<double>(delivered_total), benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<int64_t>(delivered_total));
}

void BM_SimAllToAll(benchmark::State& state) { all_to_all(state, false); }
void BM_SimAllToAllKeepTrace(benchmark::State& state) { all_to_all(state, true); }
BENCHMARK(BM_SimAllToAll)->Arg(64)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimAllToAllKeepTrace)->Arg(64)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- 1b. Growth: the same work per node, more nodes --------------------------------------

// Each node sends kGrowthMessages 16-byte messages, kGrowthFanout per round with 1 µs between
// rounds, the j-th of a round to the node (self + 1 + j mod (nodes - 1)) mod nodes: every node
// also receives exactly kGrowthMessages, and a node talks to at most kGrowthFanout peers, so the
// total work grows linearly with the nodes and a flat msgs_per_s means the simulator scales.
constexpr uint64_t kGrowthMessages = 256;
constexpr WorkerId kGrowthFanout = 16;

void BM_SimGrowth(benchmark::State& state) {
  const auto nodes = static_cast<WorkerId>(state.range(0));
  uint64_t delivered_total = 0;
  for (auto _ : state) {
    const uint64_t delivered = run_messaging(state, nodes, kGrowthMessages, false, [nodes](Env& env) {
      const uint64_t rounds = kGrowthMessages / kGrowthFanout;
      for (uint64_t round = 0; round < rounds; ++round) {
        for (WorkerId j = 0; j < kGrowthFanout; ++j) {
          const auto peer = static_cast<WorkerId>((env.self + 1 + j % (nodes - 1)) % nodes);
          env.transport.send(peer, runtime::Bytes(kPayloadBytes, uint8_t(round)));
        }
        env.clock.sleep(1us);
      }
    });
    if (delivered == 0) break;
    delivered_total += delivered;
  }
  state.counters["msgs_per_s"] = benchmark::Counter(static_cast<double>(delivered_total), benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<int64_t>(delivered_total));
}
BENCHMARK(BM_SimGrowth)
    ->ArgNames({"nodes"})
    ->Arg(4)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- 2. Fiber switches and wake-ups ---------------------------------------------------------

constexpr int kSwitchRounds = 100'000;

// Builds a one-node world, runs `a` and `b` as foreground fibers on it, and reports
// ns_per_<what> for `events_per_iteration` events per run.
template <typename Setup>
void two_fibers(benchmark::State& state, const char* counter, int64_t events_per_iteration, Setup setup) {
  double seconds = 0;
  for (auto _ : state) {
    SimWorld world(SimOptions{});
    world.add_node("n0");
    world.start(0);
    setup(world);
    seconds += timed_run(state, world, {}, SimWorld::Outcome::finished);
    if (state.error_occurred()) break;
  }
  const auto events = static_cast<double>(state.iterations() * events_per_iteration);
  state.counters[counter] = seconds * 1e9 / events;
  state.SetItemsProcessed(state.iterations() * events_per_iteration);
}

void BM_FiberSwitch(benchmark::State& state) {
  // With both fibers ready, each yield hands the CPU to the other: one switch per yield.
  two_fibers(state, "ns_per_switch", 2 * kSwitchRounds, [](SimWorld& world) {
    for (const char* name : {"a", "b"}) {
      world.spawn_foreground(0, name, [] {
        for (int i = 0; i < kSwitchRounds; ++i) boost::this_fiber::yield();
      });
    }
  });
}
BENCHMARK(BM_FiberSwitch)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_FiberPingPongEvent(benchmark::State& state) {
  // Each round wakes b (ping) and then a (pong): two blocked-fiber wake-ups per round.
  two_fibers(state, "ns_per_wake", 2 * kSwitchRounds, [](SimWorld& world) {
    auto ping = std::make_shared<runtime::Event>();
    auto pong = std::make_shared<runtime::Event>();
    world.spawn_foreground(0, "a", [ping, pong] {
      for (int i = 0; i < kSwitchRounds; ++i) {
        ping->set();
        pong->wait();
        pong->reset();
      }
    });
    world.spawn_foreground(0, "b", [ping, pong] {
      for (int i = 0; i < kSwitchRounds; ++i) {
        ping->wait();
        ping->reset();
        pong->set();
      }
    });
  });
}
BENCHMARK(BM_FiberPingPongEvent)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_FiberPingPongChannel(benchmark::State& state) {
  two_fibers(state, "ns_per_wake", 2 * kSwitchRounds, [](SimWorld& world) {
    auto there = std::make_shared<runtime::Channel<int>>();
    auto back = std::make_shared<runtime::Channel<int>>();
    world.spawn_foreground(0, "a", [there, back] {
      for (int i = 0; i < kSwitchRounds; ++i) {
        there->push(i);
        benchmark::DoNotOptimize(back->pop());
      }
    });
    world.spawn_foreground(0, "b", [there, back] {
      for (int i = 0; i < kSwitchRounds; ++i) back->push(there->pop());
    });
  });
}
BENCHMARK(BM_FiberPingPongChannel)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- 3. Heartbeats over virtual minutes -----------------------------------------------------

constexpr auto kVirtualRun = std::chrono::minutes(10);
constexpr auto kHeartbeatEvery = 100ms;
constexpr auto kHeartbeatTimeout = 300ms;  // three missed beats: the monitor would declare death

void BM_HeartbeatVirtualMinutes(benchmark::State& state) {
  constexpr WorkerId kMonitor = 0;
  constexpr WorkerId kNodes = 4;
  uint64_t beats_total = 0;
  for (auto _ : state) {
    SimOptions options;
    options.network.latency = LatencyModel::uniform(50us, 500us);
    SimWorld world(options);
    uint64_t beats = 0;
    bool missed = false;
    // The monitor waits with a deadline, as a failure detector does: each pop arms and cancels a
    // timer, which is part of what this measures.
    world.add_node("monitor", [&beats, &missed](Env& env) {
      std::vector<TimePoint> last_seen(kNodes, env.clock.now());
      for (;;) {
        std::optional<runtime::Delivery> d = env.transport.inbox().pop_until(env.clock.now() + kHeartbeatTimeout);
        const TimePoint now = env.clock.now();
        if (d && d->kind == runtime::Delivery::Kind::message) {
          ++beats;
          last_seen[d->peer] = now;
        }
        for (WorkerId p = 1; p < kNodes; ++p) missed |= now - last_seen[p] > kHeartbeatTimeout;
      }
    });
    for (WorkerId i = 1; i < kNodes; ++i) {
      world.add_node("worker" + std::to_string(i), [](Env& env) {
        env.clock.sleep(Duration{env.random.uniform_int(0, Duration{kHeartbeatEvery}.count())});  // de-phase
        for (;;) {
          env.transport.send(kMonitor, runtime::Bytes(64, uint8_t(env.self)));
          env.clock.sleep(kHeartbeatEvery);
        }
      });
    }
    for (WorkerId i = 0; i < kNodes; ++i) world.start(i);
    timed_run(state, world,
              {.stop_at = TimePoint{kVirtualRun}, .max_virtual_time = TimePoint{kVirtualRun + std::chrono::minutes(1)}},
              SimWorld::Outcome::finished);
    if (state.error_occurred()) break;
    // 6000 beats per worker in 10 minutes, give or take one at each end (de-phased start, last
    // beat in flight at the stop).
    const uint64_t expected = (kNodes - 1) * (kVirtualRun / kHeartbeatEvery);
    if (missed || beats + (kNodes - 1) < expected || beats > expected + (kNodes - 1)) {
      const std::string what = "heartbeats went missing: " + std::to_string(beats) + " of " + std::to_string(expected);
      state.SkipWithError(what.c_str());
      break;
    }
    beats_total += beats;
  }
  const double virtual_seconds = std::chrono::duration<double>(kVirtualRun).count();
  state.counters["virtual_s_per_wall_s"] =
      benchmark::Counter(virtual_seconds, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["heartbeats_per_s"] =
      benchmark::Counter(static_cast<double>(beats_total), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_HeartbeatVirtualMinutes)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dagsim::sim
