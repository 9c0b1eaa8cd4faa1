// The store-shaped use of request handlers (issue 9, "Done when"): a small key-value service
// registered with RpcAgent::add_handler beside distributed autograd on the same nodes, exchanging
// byte payloads, while distributed backward passes run, under kills and partitions.
//
// Promises checked, over several seeds (DAGSIM_SEEDS scales them): the world finishes (no call
// hangs); every key-value call either succeeds, with the value that was put when the server's
// incarnation still holds it, or fails with connection_failed / timed_out naming the server; every
// backward pass either gives the gradients of the analytic oracle or fails with a named error;
// and across the seeds both outcomes happen (the faults bite, and the service still serves).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "conformance/autograd_cluster.h"
#include "core/base/prng.h"
#include "core/rpc/wire.h"
#include "core/tensor/ops.h"

namespace dagsim::conformance {
namespace {

using namespace std::chrono_literals;
using rpc::Bytes;
using rpc::MessageType;
using runtime::TimePoint;

constexpr MessageType kPut = rpc::service_request(rpc::kTestServices + 0);
constexpr MessageType kGet = rpc::service_request(rpc::kTestServices + 1);
constexpr size_t kMaxKey = 256;
constexpr size_t kMaxValue = 1 << 16;

struct KvPut {
  static constexpr const char* kName = "kv_put";
  std::string key;
  Bytes value;
  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.str("kv_put.key", m.key, kMaxKey);
    io.blob("kv_put.value", m.value, kMaxValue);
  }
};

struct KvGet {
  static constexpr const char* kName = "kv_get";
  std::string key;
  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.str("kv_get.key", m.key, kMaxKey);
  }
};

// Which life of the server answered (its data dies with it), and what it holds under the key.
struct KvReply {
  static constexpr const char* kName = "kv_reply";
  uint32_t incarnation = 0;
  bool found = false;
  Bytes value;
  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("kv_reply.incarnation", m.incarnation);
    io.num("kv_reply.found", m.found);
    io.blob("kv_reply.value", m.value, kMaxValue);
  }
};

// One node's key-value service: two handlers on its agent, beside distributed autograd's.
struct KvService {
  std::map<std::string, Bytes> data;

  void install(rpc::RpcAgent& agent) {
    agent.add_handler(kPut, [this, &agent](WorkerId, const Bytes& payload) {
      KvPut put = rpc::from_bytes<KvPut>(payload);
      agent.env().clock.sleep(1ms);  // handlers may block: a store's disk, say
      data[put.key] = std::move(put.value);
      return rpc::to_bytes(KvReply{agent.env().incarnation, true, {}});
    });
    agent.add_handler(kGet, [this, &agent](WorkerId, const Bytes& payload) {
      const KvGet get = rpc::from_bytes<KvGet>(payload);
      auto it = data.find(get.key);
      return rpc::to_bytes(KvReply{agent.env().incarnation, it != data.end(), it != data.end() ? it->second : Bytes{}});
    });
  }
};

struct KvOutcome {
  WorkerId client, server;
  std::string op;
  std::optional<Error> error;
  std::optional<KvReply> reply;
  Bytes expected;                     // what the client put under the key
  std::optional<uint32_t> put_by;     // the server incarnation that acknowledged the put
};

struct StepOutcome {
  std::optional<Error> error;
  double max_gradient_error = 0;
};

struct SeedRun {
  sim::SimWorld::Outcome outcome;
  std::vector<KvOutcome> kv;
  std::vector<StepOutcome> steps;
};

constexpr int kNodes = 5;
const std::vector<double> kX = {0.5, -1.0, 2.0};
const std::vector<double> kW = {1.5, 0.25, -0.75};

SeedRun run_seed(uint64_t seed) {
  static const rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  sim::SimOptions options;
  options.seed = seed;
  options.random_schedule = true;
  options.network.latency = sim::LatencyModel::uniform(1ms, 5ms);
  options.network.connection_timeout = 400ms;
  dist_autograd::DistEngineOptions engine;
  engine.backward_timeout = 5s;
  AutogradCluster c(options, kNodes, registry, rpc::RpcOptions{.default_timeout = 1s, .limits = {}}, engine);
  std::vector<KvService> services(kNodes);
  for (int i = 0; i < kNodes; ++i) services[static_cast<size_t>(i)].install(*c.agents[static_cast<size_t>(i)]);

  SeedRun run;
  // Distributed backward passes: node 0 trains through nodes 1 and 2 (which also serve and use
  // the key-value service). loss = sum(tanh(x * w)).
  c.world.spawn_foreground(0, "trainer", [&] {
    for (int step = 0; step < 20; ++step) {
      StepOutcome out;
      Tensor x = from_values({3}, kX);
      Tensor w = from_values({3}, kW);
      x.set_requires_grad(true);
      w.set_requires_grad(true);
      try {
        dist_autograd::DistAutograd::Context ctx(*c.autograd[0]);
        Tensor y = c.agents[0]->rpc_sync(1, "mul", {{x, w}, {}})[0];
        Tensor z = c.agents[0]->rpc_sync(2, "tanh", {{y}, {}})[0];
        c.autograd[0]->backward(ctx.id(), {sum(z)});
        const auto& context = c.autograd[0]->container().retrieve_context(ctx.id());
        const std::vector<double> gx = context.gradient_of(x).to_vector();
        const std::vector<double> gw = context.gradient_of(w).to_vector();
        for (size_t i = 0; i < kX.size(); ++i) {
          const double d = 1 - std::tanh(kX[i] * kW[i]) * std::tanh(kX[i] * kW[i]);
          out.max_gradient_error = std::max({out.max_gradient_error, std::abs(gx[i] - d * kW[i]), std::abs(gw[i] - d * kX[i])});
        }
      } catch (const Error& e) {
        if (e.code() == ErrorCode::node_killed) throw;
        out.error = e;
      }
      run.steps.push_back(out);
      c.world.env(0).clock.sleep(30ms);
    }
  });
  // Key-value clients on the autograd nodes, against every other node.
  for (WorkerId client = 0; client < 3; ++client) {
    c.world.spawn_foreground(client, "kv.client", [&, client] {
      runtime::Env& env = c.world.env(client);
      rpc::RpcAgent& agent = *c.agents[client];
      for (int n = 0; n < 40; ++n) {
        auto server = static_cast<WorkerId>(env.random.uniform_int(0, kNodes - 2));
        if (server >= client) ++server;
        const std::string key = std::to_string(client) + "/" + std::to_string(n);
        const Bytes value = {static_cast<uint8_t>(client), static_cast<uint8_t>(n), static_cast<uint8_t>(seed)};
        KvOutcome put{client, server, "put", {}, {}, value, {}};
        try {
          put.reply = rpc::from_bytes<KvReply>(agent.request_bytes(server, kPut, rpc::to_bytes(KvPut{key, value}), std::nullopt, "kv put").get());
          put.put_by = put.reply->incarnation;
        } catch (const Error& e) {
          if (e.code() == ErrorCode::node_killed) throw;
          put.error = e;
        }
        KvOutcome get{client, server, "get", {}, {}, value, put.put_by};
        try {
          get.reply = rpc::from_bytes<KvReply>(agent.request_bytes(server, kGet, rpc::to_bytes(KvGet{key}), std::nullopt, "kv get").get());
        } catch (const Error& e) {
          if (e.code() == ErrorCode::node_killed) throw;
          get.error = e;
        }
        run.kv.push_back(std::move(put));
        run.kv.push_back(std::move(get));
        env.clock.sleep(std::chrono::milliseconds(env.random.uniform_int(5, 40)));
      }
    });
  }
  // Faults: a key-value-only node dies, another is cut off for a while (past the connection
  // timeout, or not), and late on an autograd worker dies.
  Prng faults(seed * 7919 + 1);
  c.world.at(TimePoint{std::chrono::milliseconds(faults.uniform_int(50, 400))}, "kill", [&] { c.world.kill(4); });
  const auto cut = std::chrono::milliseconds(faults.uniform_int(100, 600));
  const auto cut_for = std::chrono::milliseconds(faults.uniform_int(100, 1500));
  uint64_t partition = 0;
  c.world.at(TimePoint{cut}, "partition", [&] {
    std::vector<std::pair<WorkerId, WorkerId>> blocked;
    for (WorkerId other : {0, 1, 2}) {
      blocked.emplace_back(3, other);
      blocked.emplace_back(other, 3);
    }
    partition = c.world.partition(blocked);
  });
  c.world.at(TimePoint{cut + cut_for}, "heal", [&] { c.world.heal(partition); });
  c.world.at(TimePoint{std::chrono::milliseconds(faults.uniform_int(900, 1400))}, "kill", [&] { c.world.kill(2); });
  run.outcome = c.world.run({.max_virtual_time = TimePoint{120s}});
  return run;
}

int seeds() {
  const char* text = std::getenv("DAGSIM_SEEDS");
  const int n = text == nullptr ? 0 : std::atoi(text);
  return n > 0 ? n : 6;
}

// The simulator names its nodes: the cluster's are "worker<i>" (rpc_world.h).
bool names_server(const Error& e, WorkerId server) {
  return std::string(e.what()).find("to worker" + std::to_string(server)) != std::string::npos;
}

TEST(ServicesBesideAutograd, KeyValueCallsAndBackwardPassesShareNodesUnderKillsAndPartitions) {
  size_t kv_ok = 0, kv_failed = 0, steps_ok = 0, steps_failed = 0, values_checked = 0;
  for (int s = 1; s <= seeds(); ++s) {
    const SeedRun run = run_seed(static_cast<uint64_t>(s));
    SCOPED_TRACE("seed " + std::to_string(s));
    ASSERT_EQ(run.outcome, sim::SimWorld::Outcome::finished) << "a call hung";
    for (const KvOutcome& o : run.kv) {
      if (o.error) {
        ++kv_failed;
        EXPECT_TRUE(o.error->code() == ErrorCode::connection_failed || o.error->code() == ErrorCode::timed_out)
            << o.op << " " << o.error->what();
        EXPECT_TRUE(names_server(*o.error, o.server)) << o.op << ": " << o.error->what();
        continue;
      }
      ++kv_ok;
      ASSERT_TRUE(o.reply.has_value());
      if (o.op != "get") continue;
      // The only writer of the key is this client: a value found is the one put; and an
      // acknowledged put is found while the same life of the server answers.
      if (o.reply->found) {
        EXPECT_EQ(o.reply->value, o.expected) << "client " << o.client << " server " << o.server;
        ++values_checked;
      }
      if (o.put_by && *o.put_by == o.reply->incarnation) {
        EXPECT_TRUE(o.reply->found) << "an acknowledged put is missing on node " << o.server;
      }
    }
    for (const StepOutcome& step : run.steps) {
      if (step.error) {
        ++steps_failed;
        const ErrorCode code = step.error->code();
        EXPECT_TRUE(code == ErrorCode::connection_failed || code == ErrorCode::timed_out || code == ErrorCode::autograd_error)
            << step.error->what();
        continue;
      }
      ++steps_ok;
      EXPECT_LE(step.max_gradient_error, 1e-12) << "distributed gradients differ from the analytic ones";
    }
  }
  // The faults bite, and the services and backward passes still work beside them.
  EXPECT_GT(kv_failed, 0u);
  EXPECT_GT(kv_ok, kv_failed);
  EXPECT_GT(values_checked, 0u);
  EXPECT_GT(steps_ok, 0u);
  EXPECT_GT(steps_failed, 0u);
  std::printf("key-value calls: %zu ok, %zu failed (%zu values checked); backward steps: %zu ok, %zu failed\n", kv_ok,
              kv_failed, values_checked, steps_ok, steps_failed);
}

}  // namespace
}  // namespace dagsim::conformance
