// The transports side by side (issue 10), for reports/transports.md (scripts/bench_transports.sh):
// the machine's floor (raw TCP ping-pong and streaming between two processes, blocking sockets),
// dagsim's RPC over TcpTransport between two processes (float64 tensors of 64 B to 64 MiB, each
// way; with MACs, with --trusted-network and with TLS), the same RPC simulated (the simulator's wall cost),
// the seed example's step and the 8-layer MLP step over TCP, and 1 MiB and 64 MiB tensors streamed
// with a window of outstanding calls against raw loopback bandwidth. The second process is
// dagsim_bench_peer. Each benchmark runs on a thread of its own (a thread keeps the first fiber
// scheduler installed on it: IoScheduler for TCP, the simulator's for the simulated ones).
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <thread>

#include "bench/transport_bench.h"
#include "core/autograd/engine.h"
#include "conformance/autograd_cluster.h"

extern char** environ;

namespace dagsim::bench {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr size_t kStreamBytes = 1 << 20;
constexpr int kStreamWindow = 16;

// The growth sweep (issue 53, item 5): a round trip's payload from 64 B to 64 MiB. 64, 4096 and
// 1 MiB keep their names (scripts/pytorch_compare.py and transport_report.py read them).
void payload_sweep(benchmark::internal::Benchmark* b, bool with_channels) {
  for (int64_t bytes : {int64_t{64}, int64_t{4096}, int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20, int64_t{64} << 20}) {
    if (!with_channels) {
      b->Arg(bytes);
      continue;
    }
    for (int64_t channel : {0, 1, 2}) b->Args({bytes, channel});
  }
}
// Streams of 1 MiB messages (the reports' row) and of 64 MiB ones (the aim: 90% of raw).
void stream_sizes(benchmark::internal::Benchmark* b, bool with_channels) {
  for (int64_t bytes : {int64_t{kStreamBytes}, int64_t{64} << 20}) {
    if (!with_channels) {
      b->Arg(bytes);
      continue;
    }
    for (int64_t channel : {0, 1, 2}) b->Args({bytes, channel});
  }
}

// The peer process: started with `args`, `listen_fd` (if >= 0) as its fd 3, a pipe as its
// standard input; killed and reaped on destruction.
class Peer {
 public:
  Peer(std::vector<std::string> args, int listen_fd = -1) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) std::abort();
    // The build's peer, or DAGSIM_BENCH_PEER's (binaries carried to another machine).
    const char* peer = std::getenv("DAGSIM_BENCH_PEER");
    args.insert(args.begin(), peer != nullptr && *peer != '\0' ? peer : DAGSIM_BENCH_PEER);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], STDIN_FILENO);
    if (listen_fd >= 0) posix_spawn_file_actions_adddup2(&actions, listen_fd, 3);
    // The chosen peer, not always the build's: DAGSIM_BENCH_PEER was only argv[0] before.
    if (::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) std::abort();
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[0]);
    stdin_ = pipe_fds[1];
  }
  ~Peer() {
    ::close(stdin_);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = 0;
  int stdin_ = -1;
};

tcp::acceptor loopback_acceptor(asio::io_context& io) {
  return tcp::acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
}

void on_own_thread(const std::function<void()>& body) {
  std::thread thread(body);
  thread.join();
}

// The floor ------------------------------------------------------------------------------------

void BM_RawPingPong(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  on_own_thread([&] {
    asio::io_context io;
    tcp::acceptor acceptor = loopback_acceptor(io);
    Peer peer({"raw-echo", std::to_string(acceptor.local_endpoint().port()), std::to_string(bytes)});
    tcp::socket s = acceptor.accept();
    s.set_option(tcp::no_delay(true));
    std::vector<char> buffer(bytes, 'p');
    for (auto _ : state) {
      asio::write(s, asio::buffer(buffer));
      asio::read(s, asio::buffer(buffer));
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
  });
}
BENCHMARK(BM_RawPingPong)->Apply([](benchmark::internal::Benchmark* b) { payload_sweep(b, false); })->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_RawStream(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  on_own_thread([&] {
    asio::io_context io;
    tcp::acceptor acceptor = loopback_acceptor(io);
    Peer peer({"raw-sink", std::to_string(acceptor.local_endpoint().port()), std::to_string(bytes)});
    tcp::socket s = acceptor.accept();
    s.set_option(tcp::no_delay(true));
    std::vector<char> buffer(bytes, 's');
    int64_t unacked = 0;
    char ack = 0;
    for (auto _ : state) {
      asio::write(s, asio::buffer(buffer));
      // The same window as the RPC stream: at most kStreamWindow messages in flight.
      if (++unacked >= kStreamWindow) {
        asio::read(s, asio::buffer(&ack, 1));
        --unacked;
      }
    }
    while (unacked-- > 0) asio::read(s, asio::buffer(&ack, 1));
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  });
}
BENCHMARK(BM_RawStream)->Apply([](benchmark::internal::Benchmark* b) { stream_sizes(b, false); })->UseRealTime()->Unit(benchmark::kMicrosecond);

// dagsim over TCP ------------------------------------------------------------------------------

// Runs `body` with node 0 of a pair whose node 1 is a peer process, both connected already; with
// `gpu`, each node has it as cuda:0, mapped to the other's, and a copy of the models there.
void with_tcp_pair(BenchChannel channel, const std::function<void(BenchNode&, const MlpModels&)>& body,
                   BenchGpu gpu = BenchGpu::none) {
  // TLS: both nodes' credentials under a fresh CA, in a private folder gone after the pair.
  std::string credentials;
  if (channel == BenchChannel::tls) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dagsim-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw errors::internal_error("no folder for the bench's credentials");
    credentials = pattern;
    make_bench_credentials(credentials);
  }
  struct RemoveCredentials {
    const std::string& dir;
    ~RemoveCredentials() {
      std::error_code ignored;
      if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
    }
  } remove_credentials{credentials};
  on_own_thread([&] {
    asio::io_context& io = net::IoScheduler::for_this_thread().io();
    tcp::acceptor a0 = loopback_acceptor(io), a1 = loopback_acceptor(io);
    const uint16_t port0 = a0.local_endpoint().port(), port1 = a1.local_endpoint().port();
    Peer peer({"node", "3", std::to_string(port0), std::to_string(port1), std::to_string(static_cast<int>(channel)),
               bench_gpu_name(gpu), credentials},
              a1.native_handle());
    a1.close();
    MlpModels models;
    const rpc::FunctionRegistry registry = bench_registry(models);
    {
      BenchNode node(0, std::move(a0), port0, port1, channel, credentials, registry, gpu);
      if (gpu != BenchGpu::none) models.place_on(Device::cuda(0));
      struct ReleaseGpu {  // GPU tensors go before the node's GPU and clock, whatever happens
        MlpModels& models;
        ~ReleaseGpu() { models.release_gpu(); }
      } release_gpu{models};
      node.start();
      node.agent().rpc_sync(1, "echo", {{zeros({1})}, {}});  // connects both ways
      body(node, models);
    }
  });
}

Tensor tensor_of_bytes(size_t bytes) { return full({static_cast<int64_t>(std::max<size_t>(bytes / 8, 1))}, 0.5); }

void BM_TcpRpc(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  with_tcp_pair(static_cast<BenchChannel>(state.range(1)), [&](BenchNode& node, const MlpModels&) {
    const Tensor t = tensor_of_bytes(bytes);
    for (auto _ : state) {
      std::vector<Tensor> back = node.agent().rpc_sync(1, "echo", {{t}, {}});
      benchmark::DoNotOptimize(back);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
  });
}
// range(1): the channel (BenchChannel: 0 shared secret with MACs, 1 trusted, 2 TLS).
BENCHMARK(BM_TcpRpc)->Apply([](benchmark::internal::Benchmark* b) { payload_sweep(b, true); })->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_TcpStream(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  with_tcp_pair(static_cast<BenchChannel>(state.range(1)), [&](BenchNode& node, const MlpModels&) {
    const Tensor t = tensor_of_bytes(bytes);
    std::deque<runtime::Future<std::vector<Tensor>>> window;
    for (auto _ : state) {
      window.push_back(node.agent().rpc_async(1, "sink", {{t}, {}}));
      if (window.size() >= kStreamWindow) {
        window.front().get();
        window.pop_front();
      }
    }
    while (!window.empty()) {
      window.front().get();
      window.pop_front();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  });
}
BENCHMARK(BM_TcpStream)->Apply([](benchmark::internal::Benchmark* b) { stream_sizes(b, true); })->UseRealTime()->Unit(benchmark::kMicrosecond);

// The seed example's step: context, rpc_sync(add), mul, sum, distributed backward, gradients.
void seed_step(rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd, const Tensor& t1, const Tensor& t2,
               const Tensor& t4) {
  dist_autograd::DistAutograd::Context ctx(autograd);
  Tensor t3 = agent.rpc_sync(1, "add", {{t1, t2}, {}})[0];
  autograd.backward(ctx.id(), {sum(mul(t3, t4))});
  if (autograd.get_gradients(ctx.id()).size() != 3) throw errors::internal_error("a seed step lost a gradient");
}

struct SeedTensors {
  SeedTensors() {
    Prng prng(7);
    for (Tensor* t : {&t1, &t2, &t4}) {
      *t = rand_uniform({3, 3}, prng);
      t->set_requires_grad(true);
    }
  }
  Tensor t1, t2, t4;
};

void BM_TcpSeedStep(benchmark::State& state) {
  with_tcp_pair(static_cast<BenchChannel>(state.range(0)), [&](BenchNode& node, const MlpModels&) {
    const SeedTensors s;
    for (auto _ : state) seed_step(node.agent(), node.autograd(), s.t1, s.t2, s.t4);
  });
}
BENCHMARK(BM_TcpSeedStep)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One distributed step of the MLP: node 1 runs every other layer. With `read_back`, the step ends
// by reading one value of the gradients to the host (a GPU's queued work finishes first); returns
// that value, or 0.
double mlp_step(rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd, const MlpWeights& mlp,
                bool read_back = false) {
  dist_autograd::DistAutograd::Context ctx(autograd);
  Tensor h = mlp.x;
  for (int i = 0; i < kMlpLayers; ++i) {
    Tensor z = i % 2 == 1 ? agent.rpc_sync(1, "owned_layer", {{h}, {{"layer", i}}})[0]
                          : matmul(h, mlp.weights[static_cast<size_t>(i)]);
    h = tanh(z);
  }
  autograd.backward(ctx.id(), {sum(h)});
  if (!read_back) return 0;
  const auto grads = autograd.get_gradients(ctx.id());
  if (grads.size() != kMlpLayers / 2) throw errors::internal_error("an MLP step lost a gradient");
  return sum(grads.begin()->second).item();
}

// range(0): trusted network (no MACs); range(1): float32 (PyTorch users' dtype) or float64.
void BM_TcpMlpStep(benchmark::State& state) {
  with_tcp_pair(static_cast<BenchChannel>(state.range(0)), [&](BenchNode& node, const MlpModels& models) {
    const MlpWeights& mlp = models.of(state.range(1) == 1 ? Dtype::float32 : Dtype::float64);
    for (auto _ : state) mlp_step(node.agent(), node.autograd(), mlp);
  });
}
BENCHMARK(BM_TcpMlpStep)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"", "float32"})->UseRealTime()->Unit(benchmark::kMillisecond);

// The same step with both nodes' layers on a GPU: the input and node 0's layers on its cuda:0,
// node 1's on its own cuda:0 through the device maps (each RPC stages its tensor to the host and
// back on the other side), the backward on the GPUs. A step ends when node 0 has read a value of
// its gradients to the host, so the GPUs' queued work is inside the time. range(0): 0, the
// simulated GPU through its kernel table (the cuda backend's code path on the host: the check
// that this benchmark runs, on any machine); 1, this machine's GPU (skipped without one).
// range(1): float32. Trusted network, as a GPU cluster's.
void BM_TcpMlpStepOnGpus(benchmark::State& state) {
  const BenchGpu gpu = state.range(0) == 1 ? BenchGpu::cuda : BenchGpu::sim;
  if (const std::string why = bench_gpu_unavailable(gpu); !why.empty()) {
    state.SkipWithError(("needs a CUDA GPU: " + why).c_str());
    return;
  }
  with_tcp_pair(BenchChannel::trusted, [&](BenchNode& node, const MlpModels& models) {
    const MlpWeights& mlp = models.of(state.range(1) == 1 ? Dtype::float32 : Dtype::float64, Device::cuda(0));
    for (auto _ : state) benchmark::DoNotOptimize(mlp_step(node.agent(), node.autograd(), mlp, /*read_back=*/true));
  }, gpu);
}
BENCHMARK(BM_TcpMlpStepOnGpus)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"cuda", "float32"})->UseRealTime()->Unit(benchmark::kMillisecond);

// The MLP step on the local engine, for the distributed steps' overhead.
void BM_MlpLocal(benchmark::State& state) {
  const MlpWeights mlp;
  for (auto _ : state) {
    Tensor h = mlp.x;
    for (const Tensor& w : mlp.weights) h = tanh(matmul(h, w));
    autograd::variable_list grads = autograd::Engine::grad({sum(h)}, mlp.weights);
    benchmark::DoNotOptimize(grads);
  }
}
BENCHMARK(BM_MlpLocal)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same in the simulator (zero latency: the time is the simulator's own cost) -----------------

void with_sim_pair(benchmark::State& state, int batch, const std::function<void(conformance::AutogradCluster&)>& step) {
  on_own_thread([&] {
    const MlpModels models;
    const rpc::FunctionRegistry registry = bench_registry(models);
    conformance::AutogradCluster cluster(conformance::AutogradCluster::zero_latency(), 2, registry);
    while (state.KeepRunningBatch(batch)) {
      cluster.world.spawn_foreground(0, "bench", [&] {
        for (int i = 0; i < batch; ++i) step(cluster);
      });
      cluster.world.run({});
    }
  });
}

void BM_SimRpc(benchmark::State& state) {
  const Tensor t = tensor_of_bytes(static_cast<size_t>(state.range(0)));
  with_sim_pair(state, state.range(0) >= (1 << 20) ? 5 : 100, [&](conformance::AutogradCluster& c) {
    std::vector<Tensor> back = c.agents[0]->rpc_sync(1, "echo", {{t}, {}});
    benchmark::DoNotOptimize(back);
  });
}
BENCHMARK(BM_SimRpc)->Arg(64)->Arg(4096)->Arg(1 << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_SimSeedStep(benchmark::State& state) {
  const SeedTensors s;
  with_sim_pair(state, 100, [&](conformance::AutogradCluster& c) { seed_step(*c.agents[0], *c.autograd[0], s.t1, s.t2, s.t4); });
}
BENCHMARK(BM_SimSeedStep)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dagsim::bench
