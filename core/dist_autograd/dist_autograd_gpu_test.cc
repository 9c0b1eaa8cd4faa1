// PyTorch's GPU tests of distributed autograd and of TensorPipe's device maps, ported by name
// (dist_autograd_test.py's CudaDistAutogradTest and TensorPipeCudaDistAutogradTest, rpc_test.py's
// TensorPipeAgentCudaRpcTest), on the simulated GPU: every worker has two sim GPUs whose streams
// run late by seeded delays, so an ordering bug fails a gradient comparison here instead of
// passing by luck. Gradients are compared exactly (float64 on the sim device runs the CPU's code);
// error texts are PyTorch's.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "core/base/throws_error_test_util.h"
#include "compute/device/sim_gpu.h"
#include "core/dist_autograd/dist_autograd.h"
#include "core/fibers/local_runtime.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {
namespace {

using namespace std::chrono_literals;
using fibers::LocalRuntime;
using rpc::CallArgs;
using rpc::CallContext;
using rpc::DeviceMaps;
using rpc::FunctionRegistry;
using rpc::RpcAgent;

constexpr int kWorld = 3;
constexpr int kGpusPerWorker = 2;

const std::string kNoMapText =
    "TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to CPU before sending "
    "them over RPC, or call `set_device_map` on `TensorPipeRpcBackendOptions` to explicitly configure device mapping. ";

std::string worker_name(int rank) { return "worker" + std::to_string(rank); }

class GpuWorld : public ::testing::Test {
 protected:
  // Starts kWorld workers with `maps` (one per worker; none by default).
  void start(std::vector<DeviceMaps> maps = std::vector<DeviceMaps>(kWorld), bool skip_copy_event_wait = false) {
    registry_ = FunctionRegistry::with_builtins();
    registry_.add("gpu_add", [](CallContext&, const CallArgs& args) {
      // rpc_test.py's _gpu_add: both arguments arrived on cuda:1; the result goes out on cuda:0.
      const Tensor& x = args.tensors[0];
      const Tensor& y = args.tensors[1];
      if (!(x.device() == Device::cuda(1) && y.device() == Device::cuda(1))) {
        throw errors::invalid_argument("Wrong device affinity");
      }
      return std::vector<Tensor>{to_device(add(x, y), Device::cuda(0))};
    });
    registry_.add("gpu_add_wrong_gpus", [](CallContext&, const CallArgs& args) {
      const Tensor& x = args.tensors[0];
      const Tensor& y = args.tensors[1];
      if (!(x.is_cuda() && y.is_cuda())) throw errors::invalid_argument("Wrong device affinity");
      return std::vector<Tensor>{add(to_device(x, Device::cpu()), y)};
    });
    registry_.add("add_to_gpu", [](CallContext&, const CallArgs& args) {
      return std::vector<Tensor>{to_device(add(args.tensors[0], args.tensors[1]), Device::cuda(0))};
    });
    registry_.add("multi_gpu", [](CallContext&, const CallArgs& args) {
      // test_device_maps_multi_gpu's _gpu_add_multi_gpu: x.to(0) + y, x - y.to(1).
      const Tensor& x = args.tensors[0];
      const Tensor& y = args.tensors[1];
      return std::vector<Tensor>{add(to_device(x, Device::cuda(0)), y), sub(x, to_device(y, Device::cuda(1)))};
    });
    std::vector<std::string> names;
    std::vector<int> counts;
    for (int i = 0; i < kWorld; ++i) {
      names.push_back(worker_name(i));
      counts.push_back(kGpusPerWorker);
    }
    rpc::validate_device_maps(names, counts, maps);
    for (int i = 0; i < kWorld; ++i) {
      runtime::Env& env = rt_.add_node(worker_name(i));
      devices_.push_back(std::make_unique<DeviceSet>());
      for (int g = 0; g < kGpusPerWorker; ++g) {
        devices_.back()->add(std::make_shared<device::SimGpu>(g, env.clock, Prng(0x6b0 + static_cast<uint64_t>(i)).fork(g)));
      }
      rt_.set_devices(static_cast<WorkerId>(i), devices_.back().get());
      rpc::RpcOptions options;
      options.device_maps = rpc::device_maps_by_id(static_cast<WorkerId>(i), names, maps);
      options.reverse_device_maps = rpc::reverse_device_maps(static_cast<WorkerId>(i), names, maps);
      options.skip_copy_event_wait = skip_copy_event_wait;
      agents_.push_back(std::make_unique<RpcAgent>(env, registry_, options));
      autograd_.push_back(std::make_unique<DistAutograd>(*agents_.back(), DistEngineOptions{.backward_timeout = 5s}));
      agents_.back()->start();
    }
  }

  RpcAgent& agent(int rank) { return *agents_[static_cast<size_t>(rank)]; }
  DistAutograd& dist(int rank) { return *autograd_[static_cast<size_t>(rank)]; }

  LocalRuntime rt_;
  FunctionRegistry registry_;
  std::vector<std::unique_ptr<DeviceSet>> devices_;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
  std::vector<std::unique_ptr<DistAutograd>> autograd_;
};

Tensor rand_leaf(uint64_t seed, Device device = Device::cpu()) {
  Prng prng(seed);
  Tensor t = to_device(rand_uniform({3, 3}, prng), device);
  t.set_requires_grad(true);
  return t;
}

std::map<const void*, Tensor> by_leaf(const std::vector<std::pair<Tensor, Tensor>>& grads) {
  std::map<const void*, Tensor> out;
  for (const auto& [t, g] : grads) out[t.unsafe_impl()] = g;
  return out;
}

// dist_autograd_test.py ----------------------------------------------------------------------

using CudaDistAutogradTest = GpuWorld;

TEST_F(CudaDistAutogradTest, test_gpu_simple) {
  start();
  rt_.run_on(0, [&] {
    Tensor t1 = rand_leaf(1, Device::cuda(0)), t2 = rand_leaf(2, Device::cuda(0));
    sum(add(t1, t2)).backward();
    DistAutograd::Context ctx(dist(0));
    Tensor t3 = add(t1, t2);
    dist(0).backward(ctx.id(), {sum(t3)});
    const auto grads = by_leaf(dist(0).get_gradients(ctx.id()));
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_EQ(grads.at(t1.unsafe_impl()).device(), Device::cuda(0));
    EXPECT_EQ(grads.at(t1.unsafe_impl()).to_vector(), t1.grad().to_vector());
    EXPECT_EQ(grads.at(t2.unsafe_impl()).to_vector(), t2.grad().to_vector());
  });
}

// The shared body of the two continuation tests: CPU -> GPU -> CPU, the root on the cpu (t7) or
// on the GPU (t6), LOCAL then RPC_SYNC to the next rank, three iterations, as PyTorch's.
void gpu_to_cpu_continuation(GpuWorld& world, RpcAgent& agent, DistAutograd& dist, bool gpu_root) {
  Tensor t1 = rand_leaf(11, Device::cuda(0));
  Tensor t2 = rand_leaf(12);
  const auto exec = [&](bool rpc, const Tensor& a, const Tensor& b) {
    return rpc ? agent.rpc_sync(1, "add", {{a, b}, {}})[0] : add(a, b);
  };
  for (int iteration = 0; iteration < 3; ++iteration) {
    t1.set_grad(Tensor());
    t2.set_grad(Tensor());
    std::vector<Tensor> local_grads;
    for (bool rpc : {false, true}) {
      DistAutograd::Context ctx(dist);
      Tensor t3 = exec(rpc, t2, t2);
      Tensor t4 = add(to_device(t3, Device::cuda(0)), t1);
      Tensor t5 = exec(rpc, to_device(t4, Device::cpu()), t2);
      Tensor t6 = add(to_device(t5, Device::cuda(0)), t4);
      Tensor root = gpu_root ? sum(t6) : sum(exec(rpc, to_device(t6, Device::cpu()), t5));
      EXPECT_EQ(root.device(), gpu_root ? Device::cuda(0) : Device::cpu());
      if (!rpc) {
        root.backward();
        local_grads = {t1.grad(), t2.grad()};
        continue;
      }
      dist.backward(ctx.id(), {root});
      const auto grads = by_leaf(dist.get_gradients(ctx.id()));
      ASSERT_EQ(grads.size(), 2u);
      EXPECT_EQ(grads.at(t1.unsafe_impl()).device(), Device::cuda(0));
      EXPECT_EQ(grads.at(t2.unsafe_impl()).device(), Device::cpu());
      EXPECT_EQ(grads.at(t1.unsafe_impl()).to_vector(), local_grads[0].to_vector()) << "iteration " << iteration;
      EXPECT_EQ(grads.at(t2.unsafe_impl()).to_vector(), local_grads[1].to_vector()) << "iteration " << iteration;
    }
  }
}

TEST_F(CudaDistAutogradTest, test_gpu_to_cpu_continuation) {
  start();
  rt_.run_on(0, [&] { gpu_to_cpu_continuation(*this, agent(0), dist(0), false); });
}

TEST_F(CudaDistAutogradTest, test_gpu_to_cpu_continuation_gpu_root) {
  start();
  rt_.run_on(0, [&] { gpu_to_cpu_continuation(*this, agent(0), dist(0), true); });
}

using TensorPipeCudaDistAutogradTest = GpuWorld;

// test_device_maps_backward_pass's maps: every worker's cuda:0 to the next worker's cuda:1.
std::vector<DeviceMaps> ring_maps() {
  std::vector<DeviceMaps> maps(kWorld);
  for (int i = 0; i < kWorld; ++i) maps[static_cast<size_t>(i)].set_device_map(worker_name((i + 1) % kWorld), {{0, 1}});
  return maps;
}

TEST_F(TensorPipeCudaDistAutogradTest, test_device_maps_backward_pass) {
  // Each worker maps its cuda:0 to the next worker's cuda:1; the reverse map carries the
  // gradients back to cuda:0.
  start(ring_maps());
  rt_.run_on(0, [&] {
    Prng prng(5);
    Tensor t1 = to_device(rand_uniform({10}, prng), Device::cuda(0));
    Tensor t2 = to_device(rand_uniform({10}, prng), Device::cuda(0));
    t1.set_requires_grad(true);
    t2.set_requires_grad(true);
    DistAutograd::Context ctx(dist(0));
    Tensor res = agent(0).rpc_sync(1, "add", {{t1, t2}, {}})[0];
    EXPECT_EQ(res.device(), Device::cuda(0)) << "the reply came back through the reverse map";
    dist(0).backward(ctx.id(), {sum(res)});
    const auto grads = by_leaf(dist(0).get_gradients(ctx.id()));
    for (const Tensor& t : {t1, t2}) {
      const Tensor& g = grads.at(t.unsafe_impl());
      EXPECT_EQ(g.to_vector(), std::vector<double>(10, 1.0));
      EXPECT_EQ(g.device(), t.device());
    }
  });
}

TEST_F(TensorPipeCudaDistAutogradTest, APlantedMissingCopyWaitFailsTheGradients) {
  // The control for the test above: the same program with the receiver's stream not waiting for
  // the copy that placed the tensors on its GPU. The sim's late streams turn that into poisoned
  // values, which the comparison catches.
  start(ring_maps(), /*skip_copy_event_wait=*/true);
  rt_.run_on(0, [&] {
    Prng prng(5);
    Tensor t1 = to_device(rand_uniform({10}, prng), Device::cuda(0));
    Tensor t2 = to_device(rand_uniform({10}, prng), Device::cuda(0));
    Tensor expected = add(t1, t2);
    Tensor res = agent(0).rpc_sync(1, "add", {{t1, t2}, {}})[0];
    EXPECT_NE(res.to_vector(), expected.to_vector());
  });
}

// rpc_test.py's TensorPipeAgentCudaRpcTest ------------------------------------------------------

TEST(TensorPipeAgentCudaRpcTest, test_device_maps_wrong_worker_name) {
  std::vector<DeviceMaps> maps(2);
  maps[0].set_device_map("none_exist", {{0, 1}});
  EXPECT_TRUE(throws_error([&] { rpc::validate_device_maps({"worker0", "worker1"}, {2, 2}, maps); },
                           ErrorCode::invalid_argument,
                           {"Node worker0 has invalid target node names in its device maps\n"
                            "device maps = dict_keys(['none_exist'])\nnode names = ['worker0', 'worker1']"}));
}

TEST(TensorPipeAgentCudaRpcTest, test_device_maps_invalid_max_local_device) {
  std::vector<DeviceMaps> maps(2);
  maps[0].set_device_map("worker1", {{2, 0}});
  EXPECT_TRUE(throws_error([&] { rpc::validate_device_maps({"worker0", "worker1"}, {2, 2}, maps); },
                           ErrorCode::invalid_argument,
                           {"Node worker0 has source devices with invalid indices in its device map for worker1\n"
                            "device map = {device(type='cuda', index=2): device(type='cuda', index=0)}\n"
                            "device count = 2"}));
}

TEST(TensorPipeAgentCudaRpcTest, test_device_maps_invalid_max_remote_device) {
  std::vector<DeviceMaps> maps(2);
  maps[0].set_device_map("worker1", {{0, 2}});
  EXPECT_TRUE(throws_error([&] { rpc::validate_device_maps({"worker0", "worker1"}, {2, 2}, maps); },
                           ErrorCode::invalid_argument,
                           {"Node worker0 has target devices with invalid indices in its device map for worker1"}));
}

TEST(TensorPipeAgentCudaRpcTest, test_device_maps_many_to_one) {
  std::vector<DeviceMaps> maps(2);
  maps[0].set_device_map("worker1", {{1, 0}});
  maps[0].set_device_map("worker1", {{0, 0}});
  EXPECT_TRUE(throws_error([&] { rpc::validate_device_maps({"worker0", "worker1"}, {2, 2}, maps); },
                           ErrorCode::invalid_argument,
                           {"Node worker0 has duplicated target devices in its device map for worker1"}));
}

TEST(TensorPipeAgentCudaRpcTest, test_device_maps_one_to_many) {
  DeviceMaps maps;
  maps.set_device_map("worker1", {{0, 1}});
  EXPECT_TRUE(throws_error([&] { maps.set_device_map("worker1", {{0, 0}}); }, ErrorCode::invalid_argument,
                           {"`set_device_map` only supports 1-to-1 mapping"}));
}

TEST(TensorPipeAgentCudaRpcTest, test_device_maps_invalid_min_device) {
  DeviceMaps maps;
  EXPECT_TRUE(throws_error([&] { maps.set_device_map("worker1", {{-1, 0}}); }, ErrorCode::invalid_argument,
                           {"Device index must not be negative"}));
  EXPECT_TRUE(throws_error([&] { maps.set_device_map("worker1", {{0, -1}}); }, ErrorCode::invalid_argument,
                           {"Device index must not be negative"}));
}

using TensorPipeAgentCudaRpcWorld = GpuWorld;

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_maps_missing_config) {
  start();
  rt_.run_on(0, [&] {
    Tensor x = to_device(zeros({2}), Device::cuda(0));
    EXPECT_TRUE(throws_error([&] { agent(0).rpc_sync(1, "add", {{x, scalar_tensor(1.0)}, {}}); },
                             ErrorCode::invalid_argument,
                             {kNoMapText + "Request device mapping is not available for destination worker1, "
                                           "but found tensor on device: cuda:0"}));
    // RPC still works.
    EXPECT_EQ(agent(0).rpc_sync(1, "add", {{ones({2}), scalar_tensor(1.0)}, {}})[0].to_vector(),
              std::vector<double>(2, 2.0));
  });
}

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_maps_missing_config_response) {
  start();
  rt_.run_on(0, [&] {
    EXPECT_TRUE(throws_error([&] { agent(0).rpc_sync(1, "add_to_gpu", {{zeros({2}), scalar_tensor(1.0)}, {}}); },
                             ErrorCode::invalid_argument,
                             {"Response device mapping is not available for destination worker0"}));
    EXPECT_EQ(agent(0).rpc_sync(1, "add", {{ones({2}), scalar_tensor(1.0)}, {}})[0].to_vector(),
              std::vector<double>(2, 2.0));
  });
}

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_maps_gpu) {
  std::vector<DeviceMaps> maps(kWorld);
  maps[0].set_device_map("worker1", {{0, 1}, {1, 0}});
  start(maps);
  rt_.run_on(0, [&] {
    Tensor x = to_device(zeros({2}), Device::cuda(0));
    Tensor y = to_device(ones({2}), Device::cuda(0));
    Tensor ret = agent(0).rpc_sync(1, "gpu_add", {{x, y}, {}})[0];
    EXPECT_EQ(ret.device(), Device::cuda(1)) << "cuda:0 at the callee comes back on cuda:1";
    EXPECT_EQ(ret.to_vector(), std::vector<double>(2, 1.0));
  });
}

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_map_gpu_to_cpu_default) {
  std::vector<DeviceMaps> maps(kWorld);
  maps[0].set_device_map("worker1", rpc::DeviceMap{{Device::cuda(0), Device::cpu()}});
  start(maps);
  rt_.run_on(0, [&] {
    Tensor x = to_device(full({2}, 2.0), Device::cuda(0));
    Tensor ret = agent(0).rpc_sync(1, "add", {{x, x}, {}})[0];
    EXPECT_EQ(ret.device(), Device::cuda(0)) << "the cpu result returns through the reverse map";
    EXPECT_EQ(ret.to_vector(), std::vector<double>(2, 4.0));
  });
}

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_map_cpu_to_gpu_default) {
  std::vector<DeviceMaps> maps(kWorld);
  maps[0].set_device_map("worker1", rpc::DeviceMap{{Device::cpu(), Device::cuda(0)}});
  start(maps);
  rt_.run_on(0, [&] {
    Tensor ret = agent(0).rpc_sync(1, "add", {{ones({2}), ones({2})}, {}})[0];
    EXPECT_EQ(ret.device(), Device::cpu());
    EXPECT_EQ(ret.to_vector(), std::vector<double>(2, 2.0));
  });
}

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_maps_multi_gpu) {
  std::vector<DeviceMaps> maps(kWorld);
  maps[0].set_device_map("worker1", {{0, 1}});
  maps[0].set_device_map("worker1", {{1, 0}});
  start(maps);
  rt_.run_on(0, [&] {
    Tensor x = to_device(zeros({2}), Device::cuda(0));
    Tensor y = to_device(ones({2}), Device::cuda(1));
    const std::vector<Tensor> rets = agent(0).rpc_sync(1, "multi_gpu", {{x, y}, {}});
    EXPECT_EQ(rets[0].device(), Device::cuda(1));
    EXPECT_EQ(rets[1].device(), Device::cuda(0));
    EXPECT_EQ(rets[0].to_vector(), std::vector<double>(2, 1.0));
    EXPECT_EQ(rets[1].to_vector(), std::vector<double>(2, -1.0));
  });
}

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_mismatch) {
  std::vector<DeviceMaps> maps(kWorld);
  maps[0].set_device_map("worker1", {{0, 0}});
  start(maps);
  rt_.run_on(0, [&] {
    Tensor x = to_device(zeros({2}), Device::cuda(0));
    Tensor y = to_device(ones({2}), Device::cuda(0));
    EXPECT_TRUE(throws_error([&] { agent(0).rpc_sync(1, "gpu_add_wrong_gpus", {{x, y}, {}}); },
                             ErrorCode::invalid_argument,
                             {"Expected all tensors to be on the same device, but found at least two devices"}));
  });
}

TEST_F(TensorPipeAgentCudaRpcWorld, test_device_maps_remote) {
  std::vector<DeviceMaps> maps(kWorld);
  maps[0].set_device_map("worker1", {{1, 0}});
  start(maps);
  rt_.run_on(0, [&] {
    rpc::RRef rref = agent(0).remote(1, "add_to_gpu", {{zeros({2}), scalar_tensor(1.0)}, {}});
    const std::vector<Tensor> value = rref.to_here();
    EXPECT_EQ(value[0].device(), Device::cuda(1));
    EXPECT_EQ(value[0].to_vector(), std::vector<double>(2, 1.0));
  });
}

}  // namespace
}  // namespace dagsim::dist_autograd
