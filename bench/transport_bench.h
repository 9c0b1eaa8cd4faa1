// What the TCP benchmarks (bm_transports.cc) and their peer process (bench_peer.cc) share: the two
// nodes' names and secret, the functions the peer serves, and how a process runs one node of the
// pair (ProcessNode, TcpTransport, RpcAgent and DistAutograd on the process's IoScheduler).
//
// The functions: "echo" returns its tensor (a round trip of its size both ways), "sink" takes a
// tensor and returns nothing (a stream one way), "owned_layer" multiplies by the peer's copy of an
// MLP layer's weight (seeded identically in both processes, and on the peer's GPU when the input
// arrives on one), as bm_mlp.cc places every other layer on a second worker.
//
// A node may have a GPU as cuda:0 (BenchGpu): a simulated one running through its kernel table
// (the cuda backend's code path, with no delays: the benchmark's own check on any machine), or
// this machine's. Then each node maps cuda:0 to the other's cuda:0, as torch's
// set_device_map({0: 0}).
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compute/device/sim_gpu.h"
#include "core/dist_autograd/dist_autograd.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/rpc_agent.h"
#include "bench/mlp_weights.h"
#include "core/tensor/ops.h"
#include "net/io_scheduler.h"
#include "net/process_node.h"
#include "net/credentials.h"
#include "net/real_clock.h"
#include "net/secure_channel.h"
#include "net/tcp_transport.h"
#ifdef DAGSIM_HAVE_CUDA
#include "compute/device/cuda/cuda_gpu.h"
#endif

namespace dagsim::bench {

inline const std::string kBenchSecret = "dagsim-benchmark-shared-secret";

// How the pair's connections are authenticated (the benchmarks' last argument): the shared
// secret's handshake and a Poly1305 MAC on every envelope (the channel before issue 49), the same
// handshake and then plain frames (--trusted-network), or mutual TLS 1.3 with a certificate per node
// (the default since issue 49).
enum class BenchChannel : int { shared_secret = 0, trusted = 1, tls = 2 };

// Credentials for both nodes of a pair, under a fresh CA: `dir`/bench0 and `dir`/bench1.
inline void make_bench_credentials(const std::string& dir) {
  net::CertificateAuthority ca = net::CertificateAuthority::create("dagsim bench CA");
  for (const char* name : {"bench0", "bench1"}) ca.issue(name).save(dir + "/" + name);
}

inline rpc::FunctionRegistry bench_registry(const MlpModels& models) {
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  registry.add("echo", [](rpc::CallContext&, const rpc::CallArgs& args) { return std::vector<Tensor>{args.tensors.at(0)}; });
  registry.add("sink", [](rpc::CallContext&, const rpc::CallArgs&) { return std::vector<Tensor>{}; });
  registry.add("owned_layer", [&models](rpc::CallContext&, const rpc::CallArgs& args) {
    const auto index = static_cast<size_t>(args.attribute("owned_layer", "layer"));
    const Tensor& h = args.tensors.at(0);
    return std::vector<Tensor>{matmul(h, models.of(h.dtype(), h.device()).weights.at(index))};
  });
  return registry;
}

enum class BenchGpu { none, sim, cuda };

// "none", "sim" or "cuda"; anything else is nullopt.
inline std::optional<BenchGpu> parse_bench_gpu(const std::string& name) {
  if (name == "none") return BenchGpu::none;
  if (name == "sim") return BenchGpu::sim;
  if (name == "cuda") return BenchGpu::cuda;
  return std::nullopt;
}
inline const char* bench_gpu_name(BenchGpu gpu) {
  return gpu == BenchGpu::sim ? "sim" : gpu == BenchGpu::cuda ? "cuda" : "none";
}

// Why `gpu` cannot run on this machine, or "".
inline std::string bench_gpu_unavailable(BenchGpu gpu) {
  if (gpu != BenchGpu::cuda) return "";
#ifdef DAGSIM_HAVE_CUDA
  return device::cuda::device_count() == 0 ? device::cuda::why_no_device() : "";
#else
  return "this build has no cuda backend (no nvcc at build time)";
#endif
}

// The node's devices for `gpu`: none, or cuda:0.
inline std::unique_ptr<DeviceSet> make_bench_gpus(BenchGpu gpu, runtime::Clock& clock) {
  if (gpu == BenchGpu::none) return nullptr;
  auto set = std::make_unique<DeviceSet>();
  if (gpu == BenchGpu::sim) {
    auto sim = std::make_shared<device::SimGpu>(0, clock, Prng(1), device::SimGpuDelays{0, 0, 0, 0});
    sim->use_kernel_table(true);
    set->add(std::move(sim));
    return set;
  }
#ifdef DAGSIM_HAVE_CUDA
  set->add(std::make_shared<device::cuda::CudaGpu>(0, &clock));
  return set;
#else
  throw errors::invalid_argument("a cuda benchmark node: " + bench_gpu_unavailable(gpu));
#endif
}

// One node of the benchmark pair in this process. REQUIRES: the calling thread runs no other
// scheduler than IoScheduler.
class BenchNode {
 public:
  // `credentials`: the directory make_bench_credentials filled (TLS only).
  BenchNode(WorkerId self, boost::asio::ip::tcp::acceptor acceptor, uint16_t port0, uint16_t port1, BenchChannel channel,
            const std::string& credentials, const rpc::FunctionRegistry& registry, BenchGpu gpu = BenchGpu::none)
      : io_(net::IoScheduler::for_this_thread().io()), clock_(io_), gpus_(make_bench_gpus(gpu, clock_)),
        transport_(io_, std::move(acceptor), options(self, port0, port1, channel, credentials)),
        node_(self == 0 ? "bench0" : "bench1", self, 0, 1, clock_, transport_, log_, [](const runtime::FiberContext&, std::string what) {
          std::fprintf(stderr, "bench node fiber failed: %s\n", what.c_str());
        }),
        agent_(node_.env(), registry, rpc_options(self, gpus_ != nullptr)), autograd_(agent_) {
    if (gpus_ != nullptr) node_.fibers().set_devices(gpus_.get());
    // The main context acts as one of the node's fibers, so it may call and wait.
    main_.node_name = node_.env().name;
    main_.fiber_name = "main";
    main_.scope = node_.lifetime();
    main_.clock = &clock_;
    main_.spawner = &node_;
    main_.devices = gpus_.get();
    runtime::set_current_fiber(&main_);
  }
  // Starts serving. After what the registry's functions read is ready (a GPU copy of the models:
  // placing it may yield, and a request served meanwhile would find it missing).
  void start() { agent_.start(); }

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
  static net::TcpTransportOptions options(WorkerId self, uint16_t port0, uint16_t port1, BenchChannel channel,
                                         const std::string& credentials) {
    net::TcpTransportOptions o;
    o.self = self;
    o.cluster_id = 0xbe7c;
    o.names = {"bench0", "bench1"};
    o.peers = {{"127.0.0.1", port0}, {"127.0.0.1", port1}};
    o.secret.assign(kBenchSecret.begin(), kBenchSecret.end());
    o.trusted_network = channel == BenchChannel::trusted;
    if (channel == BenchChannel::tls) {
      o.tls = std::make_shared<const net::TlsContext>(net::NodeCredential::load(credentials + "/" + o.names[self]));
    }
    o.connection_timeout = std::chrono::seconds(10);
    return o;
  }
  static rpc::RpcOptions rpc_options(WorkerId self, bool gpus) {
    rpc::RpcOptions o;
    if (gpus) {
      const WorkerId peer = 1 - self;
      o.device_maps[peer] = {{Device::cuda(0), Device::cuda(0)}};
      o.reverse_device_maps[peer] = {{Device::cuda(0), Device::cuda(0)}};
    }
    return o;
  }

  boost::asio::io_context& io_;
  net::RealClock clock_;
  std::unique_ptr<DeviceSet> gpus_;  // outlives the node's fibers
  runtime::MemoryLog log_;
  net::TcpTransport transport_;
  net::ProcessNode node_;
  rpc::RpcAgent agent_;
  dist_autograd::DistAutograd autograd_;
  runtime::FiberContext main_;
};

}  // namespace dagsim::bench
