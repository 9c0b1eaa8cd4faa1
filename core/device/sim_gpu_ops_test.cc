// Every op of the op table on the simulated GPU, by enumerating the table: on cuda:0 each op gives
// the CPU's outputs and, through a backward pass, the CPU's gradients, bit for bit in float64,
// with every output and gradient on cuda:0 and no racy read. A new op is covered the moment it is
// in the table.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "core/device/sim_gpu.h"
#include "core/fibers/local_runtime.h"
#include "core/rpc/op_table.h"
#include "core/tensor/ops.h"

namespace dagsim::device {
namespace {

struct OpRun {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;  // one per example tensor that requires grad
};

// Runs `op` on copies of the example's tensors moved to `device`, then backward from a weighted
// sum of its outputs (weights seeded per output, so every output's gradient path is exercised).
OpRun run_op(const rpc::OpDef& op, const rpc::OpExample& ex, Device device) {
  std::vector<Tensor> inputs;
  for (const Tensor& t : ex.tensors) {
    Tensor moved = to_device(detach(t), device);
    if (t.requires_grad()) {
      if (moved.is_same(t) || moved.storage() == t.storage()) moved = clone(detach(t));
      moved.set_requires_grad(true);
    }
    inputs.push_back(moved);
  }
  rpc::CallContext local{nullptr, 0};
  rpc::CallArgs args;
  args.tensors = inputs;
  args.attributes = ex.attributes;
  OpRun run;
  run.outputs = op.run(local, args);
  Tensor loss;
  Prng weights(17);
  for (const Tensor& out : run.outputs) {
    if (!out.requires_grad()) continue;
    Tensor w = to_device(randn(out.shape(), weights), device);
    Tensor term = sum(mul(out, w));
    loss = loss.defined() ? add(loss, term) : term;
  }
  if (loss.defined()) loss.backward();
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) run.grads.push_back(t.grad());
  }
  return run;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

TEST(SimGpuOps, EveryOpOfTheOpTableGivesTheCpusOutputsAndGradientsOnCuda0) {
  fibers::LocalRuntime rt;
  runtime::Env& env = rt.add_node("worker0");
  DeviceSet devices;
  auto gpu = std::make_shared<SimGpu>(0, env.clock, Prng(3));
  SimGpu& sim = *gpu;
  devices.add(std::move(gpu));
  rt.set_devices(0, &devices);
  size_t ops = 0;
  rt.run_on(0, [&] {
    for (const rpc::OpDef& op : rpc::op_table()) {
      SCOPED_TRACE(op.name);
      Prng prng(0x5eed + ops);
      const rpc::OpExample ex = op.example(prng);
      const OpRun cpu = run_op(op, ex, Device::cpu());
      const OpRun cuda = run_op(op, ex, Device::cuda(0));
      ASSERT_EQ(cuda.outputs.size(), cpu.outputs.size());
      for (size_t i = 0; i < cpu.outputs.size(); ++i) {
        EXPECT_EQ(cuda.outputs[i].device(), Device::cuda(0)) << "output " << i;
        EXPECT_TRUE(same_bits(cuda.outputs[i], cpu.outputs[i])) << "output " << i;
      }
      ASSERT_EQ(cuda.grads.size(), cpu.grads.size());
      for (size_t i = 0; i < cpu.grads.size(); ++i) {
        ASSERT_EQ(cuda.grads[i].defined(), cpu.grads[i].defined()) << "gradient " << i;
        if (!cpu.grads[i].defined()) continue;
        EXPECT_EQ(cuda.grads[i].device(), Device::cuda(0)) << "gradient " << i;
        EXPECT_TRUE(same_bits(cuda.grads[i], cpu.grads[i])) << "gradient " << i;
      }
      ++ops;
    }
  });
  EXPECT_EQ(ops, rpc::op_table().size());
  EXPECT_EQ(sim.stats().racy_reads, 0u);
}

}  // namespace
}  // namespace dagsim::device
