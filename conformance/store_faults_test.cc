// The built-in store and rendezvous under the simulator's faults (issue 11): what LocalRuntime
// cannot do to them (partitions, latency, a store that dies mid-round) is done here.
//
// Promises checked: a store partitioned away makes every waiting store call fail within its
// timeout (plus the reply grace and one connection timeout), naming the store's node, and a
// partition that heals in time loses nothing; a rendezvous whose store is partitioned away fails
// every joiner with rendezvous_connection_failed (never a hang); and over random schedules of
// store kills and partitions (DAGSIM_SEEDS seeds), every call ends, and every value read is one
// that was written to that life of the store.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "conformance/autograd_cluster.h"
#include "core/base/prng.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using runtime::TimePoint;
using store::Bytes;

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A simulated cluster: node 0 runs the store, every node has a client of it.
struct StoreCluster {
  explicit StoreCluster(int nodes, uint64_t seed = 1, runtime::Duration store_timeout = 2s)
      : registry(rpc::FunctionRegistry::with_builtins()), cluster(options(seed), nodes, registry) {
    service = std::make_unique<store::StoreService>(*cluster.agents[0]);
    for (int i = 0; i < nodes; ++i) {
      clients.push_back(std::make_unique<store::StoreClient>(*cluster.agents[static_cast<size_t>(i)], 0));
      clients.back()->set_timeout(store_timeout);
    }
  }
  static sim::SimOptions options(uint64_t seed) {
    sim::SimOptions o;
    o.seed = seed;
    o.network.latency = runtime::LatencyModel::uniform(100us, 1ms);
    o.network.connection_timeout = 1s;
    return o;
  }
  // Cuts node 0 off from everyone, both ways.
  uint64_t isolate_store() {
    std::vector<std::pair<WorkerId, WorkerId>> blocked;
    for (WorkerId i = 1; i < cluster.agents.size(); ++i) {
      blocked.emplace_back(0, i);
      blocked.emplace_back(i, 0);
    }
    return cluster.world.partition(blocked);
  }
  rpc::FunctionRegistry registry;
  AutogradCluster cluster;
  std::unique_ptr<store::StoreService> service;
  std::vector<std::unique_ptr<store::StoreClient>> clients;
};

TEST(StoreFaults, AStorePartitionedAwayFailsEveryWaiterWithinItsTimeoutNamingIt) {
  StoreCluster c(3);
  sim::SimWorld& world = c.cluster.world;
  std::vector<std::string> errors(3);
  std::vector<TimePoint> ended(3);
  for (int i = 1; i <= 2; ++i) {
    world.spawn_foreground(static_cast<WorkerId>(i), "waiter", [&, i] {
      try {
        c.clients[static_cast<size_t>(i)]->get("never set");
      } catch (const Error& e) {
        EXPECT_TRUE(e.code() == ErrorCode::timed_out || e.code() == ErrorCode::connection_failed) << e.what();
        errors[static_cast<size_t>(i)] = e.what();
      }
      ended[static_cast<size_t>(i)] = world.now();
    });
  }
  world.at(TimePoint{100ms}, "isolate the store", [&] { c.isolate_store(); });
  world.run({});
  for (int i = 1; i <= 2; ++i) {
    EXPECT_NE(errors[static_cast<size_t>(i)].find("store get on node 0"), std::string::npos) << errors[static_cast<size_t>(i)];
    EXPECT_LE(ended[static_cast<size_t>(i)], TimePoint{2s + store::kReplyGrace + 1s + 10ms});
  }
}

TEST(StoreFaults, APartitionThatHealsInTimeLosesNothing) {
  StoreCluster c(2);
  sim::SimWorld& world = c.cluster.world;
  std::optional<Bytes> got;
  world.spawn_foreground(1, "client", [&] {
    c.clients[1]->set("k", text("before"));
    world.env(1).clock.sleep(200ms);  // the partition begins at 100 ms and heals at 400 ms
    c.clients[1]->set("k", text("during"));
    got = c.clients[1]->get("k");
  });
  world.at(TimePoint{100ms}, "isolate", [&] {
    const uint64_t id = c.isolate_store();
    world.at(TimePoint{400ms}, "heal", [&world, id] { world.heal(id); });
  });
  world.run({});
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, text("during"));
}

TEST(StoreFaults, ARendezvousWhoseStoreIsPartitionedAwayFailsEveryJoinerNeverHangs) {
  StoreCluster c(4);
  sim::SimWorld& world = c.cluster.world;
  rendezvous::RendezvousSettings settings;
  settings.run_id = "job";
  settings.min_nodes = 4;  // never reached: the store goes first
  settings.max_nodes = 4;
  std::vector<std::unique_ptr<rendezvous::RendezvousHandler>> handlers;
  for (WorkerId i = 1; i <= 3; ++i) {
    rendezvous::NodeDesc node;
    node.addr = "worker" + std::to_string(i);
    handlers.push_back(std::make_unique<rendezvous::RendezvousHandler>(world.env(i), *c.clients[i], settings, node));
  }
  int failed = 0;
  for (WorkerId i = 1; i <= 3; ++i) {
    world.spawn_foreground(i, "joiner", [&, i] {
      try {
        handlers[i - 1]->next_rendezvous();
        ADD_FAILURE() << "a round formed without its store";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::rendezvous_connection_failed) << e.what();
        EXPECT_NE(std::string(e.what()).find("run job"), std::string::npos) << e.what();
        ++failed;
      }
    });
  }
  world.at(TimePoint{50ms}, "isolate the store", [&] { c.isolate_store(); });
  world.run({});
  EXPECT_EQ(failed, 3);
  // Within the store's timeout, its reply grace and one connection timeout of the partition: far
  // inside the 600 s join timeout.
  EXPECT_LE(world.now(), TimePoint{50ms + 2s + store::kReplyGrace + 1s + 10ms}) << "every joiner failed soon";
  world.shutdown();
}

int seeds() {
  const char* env = std::getenv("DAGSIM_SEEDS");
  return env != nullptr ? std::max(1, std::atoi(env)) : 20;
}

TEST(StoreFaults, UnderRandomKillsAndPartitionsEveryCallEndsAndReadsOnlyWhatThatStoreLifeHeld) {
  int failures_seen = 0, successes_seen = 0;
  for (int seed = 1; seed <= seeds(); ++seed) {
    StoreCluster c(3, static_cast<uint64_t>(seed), 1s);
    sim::SimWorld& world = c.cluster.world;
    Prng random(static_cast<uint64_t>(seed));
    // The store's faults: a partition and a kill (restarting it would need a new service: a
    // killed store stays dead), at random times.
    const auto partition_at = TimePoint{std::chrono::milliseconds(random.uniform_int(0, 3000))};
    const auto heal_at = partition_at + std::chrono::milliseconds(random.uniform_int(100, 2000));
    const auto kill_at = TimePoint{std::chrono::milliseconds(random.uniform_int(1000, 6000))};
    std::optional<uint64_t> partition;
    world.at(partition_at, "partition", [&] { partition = c.isolate_store(); });
    world.at(heal_at, "heal", [&] { world.heal(*partition); });
    world.at(kill_at, "kill", [&] { world.kill(0); });
    // Each client writes its own key, then reads it back: a read gives the last value it wrote
    // that the store acknowledged, or one it wrote later (an unacknowledged write may have landed).
    for (WorkerId i = 1; i <= 2; ++i) {
      world.spawn_foreground(i, "client", [&, i] {
        const std::string key = "k" + std::to_string(i);
        int acknowledged = -1, attempted = -1;
        for (int step = 0; step < 40; ++step) {
          try {
            attempted = step;
            c.clients[i]->set(key, text(std::to_string(step)));
            acknowledged = step;
            const Bytes v = c.clients[i]->get(key);
            const int read = std::stoi(std::string(v.begin(), v.end()));
            EXPECT_GE(read, acknowledged) << "seed " << seed;
            EXPECT_LE(read, attempted) << "seed " << seed;
            ++successes_seen;
          } catch (const Error& e) {
            EXPECT_TRUE(e.code() == ErrorCode::timed_out || e.code() == ErrorCode::connection_failed)
                << "seed " << seed << ": " << e.what();
            ++failures_seen;
          }
          world.env(i).clock.sleep(100ms);
        }
      });
    }
    const sim::SimWorld::Outcome outcome = world.run({.stop_at = std::nullopt, .max_virtual_time = TimePoint{10min}});
    EXPECT_EQ(outcome, sim::SimWorld::Outcome::finished) << "seed " << seed << ": a call hung\n" << world.stuck_report();
  }
  EXPECT_GT(failures_seen, 0) << "the faults bite";
  EXPECT_GT(successes_seen, 0) << "and the store still serves";
}

}  // namespace
}  // namespace dagsim::conformance
