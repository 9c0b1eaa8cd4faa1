// The backends of the store conformance suite (see store_backend.h): the built-in store on
// LocalRuntime, etcd and PyTorch's TCPStore protocol on the real runtime, and run_concurrently.
#include <gtest/gtest.h>

#include <memory>

#include "conformance/store_backend.h"
#include "core/base/error.h"
#include "core/fibers/local_runtime.h"
#include "core/runtime/cancel_scope.h"
#include "core/runtime/event.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"
#include "net/etcd/etcd_process.h"
#include "net/etcd/etcd_store.h"
#include "net/etcd/real_runtime_harness.h"
#include "net/tcpstore/tcp_store_client.h"
#include "net/tcpstore/tcp_store_server.h"

namespace dagsim::conformance {

namespace {

using namespace std::chrono_literals;

// StoreService on node 0 ("store"), StoreClients on nodes 1..kStoreClients, LocalRuntime's
// virtual time.
class BuiltinBackend final : public StoreBackend {
 public:
  std::string name() const override { return "builtin"; }

  void run(Duration timeout, const std::function<void(StoreWorld&)>& body) override {
    World world;
    world.start(timeout);
    world.rt.run_on(1, [&] { body(world); });
  }

 private:
  struct World final : StoreWorld {
    // Every node dies and its fibers unwind before the clients and agents they block in go away.
    ~World() override {
      for (WorkerId i = 0; i < rt.num_nodes(); ++i) {
        if (rt.is_alive(i)) rt.kill(i);
      }
      rt.run();
    }
    void start(Duration timeout) {
      registry = rpc::FunctionRegistry::with_builtins();
      for (int i = 0; i <= kStoreClients; ++i) {
        runtime::Env& env = rt.add_node(i == 0 ? "store" : "client" + std::to_string(i - 1));
        agents.push_back(std::make_unique<rpc::RpcAgent>(env, registry));
        if (i == 0) service = std::make_unique<store::StoreService>(*agents.back());
        agents.back()->start();
        if (i == 0) continue;
        clients.push_back(std::make_unique<store::StoreClient>(*agents.back(), 0));
        clients.back()->set_timeout(timeout);
      }
    }
    store::Store& client(int i) override { return *clients.at(static_cast<size_t>(i)); }
    runtime::Clock& clock() override { return rt.env(1).clock; }
    void spawn(int i, std::string fiber, std::function<void()> fn) override {
      rt.env(static_cast<WorkerId>(i + 1)).spawner.spawn(std::move(fiber), std::move(fn));
    }
    void kill_store() override { rt.kill(0); }
    std::string store_name() const override { return "on node 0"; }
    Duration slack() const override { return 10ms; }

    fibers::LocalRuntime rt;
    rpc::FunctionRegistry registry;
    std::vector<std::unique_ptr<rpc::RpcAgent>> agents;
    std::unique_ptr<store::StoreService> service;
    std::vector<std::unique_ptr<store::StoreClient>> clients;
  };
};

// A world on one real-runtime node whose clients it owns. The fibers a case spawns beside its own
// may still be inside a client's call when the case ends (a deleter whose reply is on its way after
// the watcher saw the delete): they are cancelled and joined before any client goes, which the
// sanitizer tier caught as a use after free.
struct RealRuntimeWorld : StoreWorld {
  explicit RealRuntimeWorld(net::etcd::RealRuntime& rt) : rt(rt), helpers("store world helpers", rt.nodes[0]->spawner) {}
  ~RealRuntimeWorld() override {
    helpers.cancel();
    helpers.join();
  }
  store::Store& client(int i) override { return *clients.at(static_cast<size_t>(i)); }
  runtime::Clock& clock() override { return rt.clock; }
  void spawn(int, std::string fiber, std::function<void()> fn) override {
    rt.nodes[0]->spawner.spawn(helpers, std::move(fiber), std::move(fn));
  }

  net::etcd::RealRuntime& rt;
  std::vector<std::unique_ptr<store::Store>> clients;
  runtime::CancelScope helpers;
};

// kStoreClients EtcdStores (a connection pool each) on one real-runtime node, under a prefix of
// their own on a throwaway etcd that this backend starts on first use (and again after a case
// killed it), from the test's main thread, so that it outlives each case's runtime thread.
class EtcdBackend final : public StoreBackend {
 public:
  std::string name() const override { return "etcd"; }
  std::optional<std::string> unavailable() const override { return net::etcd::EtcdProcess::unavailable(); }
  StoreGaps gaps() const override {
    StoreGaps g;
    g.refused_retried_until_timeout = true;  // an etcd that refuses may be restarting
    return g;
  }

  void run(Duration timeout, const std::function<void(StoreWorld&)>& body) override {
    if (!etcd_) {
      etcd_ = std::make_unique<net::etcd::EtcdProcess>();
    } else if (!etcd_->alive()) {
      etcd_->restart();
    }
    const std::string prefix = "/dagsim/conformance/" + std::to_string(++runs_) + "/";
    net::etcd::run_on_real_runtime(1, 120s, [&](net::etcd::RealRuntime& rt) {
      World world(rt, *etcd_, prefix, timeout);
      body(world);
    });
  }

 private:
  struct World final : RealRuntimeWorld {
    World(net::etcd::RealRuntime& rt, net::etcd::EtcdProcess& etcd, const std::string& prefix, Duration timeout)
        : RealRuntimeWorld(rt), etcd(etcd) {
      for (int i = 0; i < kStoreClients; ++i) {
        clients.push_back(std::make_unique<net::etcd::EtcdStore>(rt.io, rt.clock, net::etcd::EtcdStoreOptions{etcd.endpoint(), prefix}));
        clients.back()->set_timeout(timeout);
      }
    }
    void kill_store() override { etcd.kill(); }
    std::string store_name() const override { return etcd.endpoint().name(); }
    Duration slack() const override { return 300ms; }

    net::etcd::EtcdProcess& etcd;
  };

  std::unique_ptr<net::etcd::EtcdProcess> etcd_;
  uint64_t runs_ = 0;
};

// A TcpStoreServer (the built-in store's KeyValueTable behind PyTorch 1.13's TCPStore protocol)
// on node 0 of a real runtime, and kStoreClients TcpStoreClients of it, each its own connection.
class TcpStoreBackend final : public StoreBackend {
 public:
  std::string name() const override { return "tcpstore"; }
  StoreGaps gaps() const override {
    StoreGaps g;
    g.versions_per_client = true;
    g.add_error_closes_connection = true;
    g.refused_retried_until_timeout = true;
    return g;
  }

  void run(Duration timeout, const std::function<void(StoreWorld&)>& body) override {
    net::etcd::run_on_real_runtime(1, 120s, [&](net::etcd::RealRuntime& rt) {
      namespace asio = boost::asio;
      asio::ip::tcp::acceptor acceptor(rt.io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      net::tcpstore::TcpStoreServer server(rt.io, rt.nodes[0]->spawner, std::move(acceptor),
                                           std::make_shared<store::KeyValueTable>());
      World world(rt, server, timeout);
      body(world);
    });
  }

 private:
  struct World final : RealRuntimeWorld {
    World(net::etcd::RealRuntime& rt, net::tcpstore::TcpStoreServer& server, Duration timeout)
        : RealRuntimeWorld(rt), server(server) {
      for (int i = 0; i < kStoreClients; ++i) {
        net::tcpstore::TcpStoreClientOptions options;
        options.port = server.port();
        auto client = std::make_unique<net::tcpstore::TcpStoreClient>(rt.io, options);
        client->set_timeout(timeout);
        address = client->address();
        clients.push_back(std::move(client));
      }
    }
    void kill_store() override { server.close(); }
    std::string store_name() const override { return address; }
    Duration slack() const override { return 300ms; }

    net::tcpstore::TcpStoreServer& server;
    std::string address;
  };
};

}  // namespace

std::vector<std::shared_ptr<StoreBackend>> all_store_backends() {
  // Built once: GoogleTest may evaluate the parameter generator more than once, and a backend
  // keeps its server (etcd) from case to case.
  static const std::vector<std::shared_ptr<StoreBackend>> backends = {
      std::make_shared<BuiltinBackend>(),
      std::make_shared<EtcdBackend>(),
      std::make_shared<TcpStoreBackend>(),
      // A further backend is one more StoreBackend here.
  };
  return backends;
}

void run_concurrently(StoreWorld& world, const std::vector<std::function<void()>>& fns) {
  auto left = std::make_shared<size_t>(fns.size());
  auto all_ended = std::make_shared<runtime::Event>();
  auto failures = std::make_shared<std::vector<std::string>>();
  for (size_t k = 0; k < fns.size(); ++k) {
    world.spawn(static_cast<int>(k) % kStoreClients, "concurrent" + std::to_string(k), [=, fn = fns[k]] {
      // Counted on the way out, however the fiber ends.
      struct Ended {
        std::shared_ptr<size_t> left;
        std::shared_ptr<runtime::Event> all_ended;
        ~Ended() {
          if (--*left == 0) all_ended->set();
        }
      } ended{left, all_ended};
      try {
        fn();
      } catch (const Error& e) {
        runtime::rethrow_if_unwinding(e);
        failures->push_back("fiber " + std::to_string(k) + ": " + e.what());
      }
    });
  }
  if (!fns.empty()) all_ended->wait();
  for (const std::string& f : *failures) ADD_FAILURE() << f;
}

}  // namespace dagsim::conformance
