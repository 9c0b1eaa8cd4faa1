// What the TCP benchmarks (bm_transports.cc) and their peer process (bench_peer.cc) share: the two
// nodes' names and secret, the functions the peer serves, and how a process runs one node of the
// pair (ProcessNode, TcpTransport, RpcAgent and DistAutograd on the process's IoScheduler).
//
// The functions: "echo" returns its tensor (a round trip of its size both ways), "sink" takes a
// tensor and returns nothing (a stream one way), "owned_layer" multiplies by the peer's copy of an
// MLP layer's weight (seeded identically in both processes), as bm_mlp.cc places every other layer
// on a second worker.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/rpc_agent.h"
#include "bench/mlp_weights.h"
#include "core/tensor/ops.h"
#include "net/io_scheduler.h"
#include "net/process_node.h"
#include "net/real_clock.h"
#include "net/tcp_transport.h"

namespace dagsim::bench {

inline const std::string kBenchSecret = "dagsim-benchmark-shared-secret";

inline rpc::FunctionRegistry bench_registry(const MlpModels& models) {
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  registry.add("echo", [](rpc::CallContext&, const rpc::CallArgs& args) { return std::vector<Tensor>{args.tensors.at(0)}; });
  registry.add("sink", [](rpc::CallContext&, const rpc::CallArgs&) { return std::vector<Tensor>{}; });
  registry.add("owned_layer", [&models](rpc::CallContext&, const rpc::CallArgs& args) {
    const auto index = static_cast<size_t>(args.attribute("owned_layer", "layer"));
    const Tensor& h = args.tensors.at(0);
    return std::vector<Tensor>{matmul(h, models.of(h.dtype()).weights.at(index))};
  });
  return registry;
}

// One node of the benchmark pair in this process. REQUIRES: the calling thread runs no other
// scheduler than IoScheduler.
class BenchNode {
 public:
  BenchNode(WorkerId self, boost::asio::ip::tcp::acceptor acceptor, uint16_t port0, uint16_t port1, bool trusted,
            const rpc::FunctionRegistry& registry)
      : io_(net::IoScheduler::for_this_thread().io()), clock_(io_), transport_(io_, std::move(acceptor), options(self, port0, port1, trusted)),
        node_(self == 0 ? "bench0" : "bench1", self, 0, 1, clock_, transport_, log_, [](const runtime::FiberContext&, std::string what) {
          std::fprintf(stderr, "bench node fiber failed: %s\n", what.c_str());
        }),
        agent_(node_.env(), registry), autograd_(agent_) {
    agent_.start();
    // The main context acts as one of the node's fibers, so it may call and wait.
    main_.node_name = node_.env().name;
    main_.fiber_name = "main";
    main_.scope = node_.lifetime();
    main_.clock = &clock_;
    main_.spawner = &node_;
    runtime::set_current_fiber(&main_);
  }
  ~BenchNode() {
    runtime::set_current_fiber(nullptr);
    transport_.close();
    node_.kill_and_join(std::chrono::seconds(5));
  }

  rpc::RpcAgent& agent() { return agent_; }
  dist_autograd::DistAutograd& autograd() { return autograd_; }
  runtime::Clock& clock() { return clock_; }
  net::TcpTransport& transport() { return transport_; }

 private:
  static net::TcpTransportOptions options(WorkerId self, uint16_t port0, uint16_t port1, bool trusted) {
    net::TcpTransportOptions o;
    o.self = self;
    o.cluster_id = 0xbe7c;
    o.names = {"bench0", "bench1"};
    o.peers = {{"127.0.0.1", port0}, {"127.0.0.1", port1}};
    o.secret.assign(kBenchSecret.begin(), kBenchSecret.end());
    o.trusted_network = trusted;
    o.connection_timeout = std::chrono::seconds(10);
    return o;
  }

  boost::asio::io_context& io_;
  net::RealClock clock_;
  runtime::MemoryLog log_;
  net::TcpTransport transport_;
  net::ProcessNode node_;
  rpc::RpcAgent agent_;
  dist_autograd::DistAutograd autograd_;
  runtime::FiberContext main_;
};

}  // namespace dagsim::bench
