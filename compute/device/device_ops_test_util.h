// Shared by the device op tests (sim_gpu_ops_test.cc, cuda/cuda_gpu_test.cc): each op of the op
// table and a broadcasting and training workload, run on cuda:0 and on the cpu, compared.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/base/error.h"
#include "core/optim/optimizer.h"
#include "core/rpc/op_table.h"
#include "core/tensor/device_kernels.h"
#include "core/tensor/ops.h"

namespace dagsim::device::testing {

struct OpRun {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;  // one per example tensor that requires grad
};

// Runs `op` on copies of the example's tensors moved to `device`, then backward from a weighted
// sum of its outputs (weights seeded per output, so every output's gradient path is exercised).
inline OpRun run_op(const rpc::OpDef& op, const rpc::OpExample& ex, Device device) {
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

inline bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

// Elementwise within rtol and atol, NaN equal to NaN: for a GPU whose libm and reduction order
// are its own.
inline bool close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  }
  return true;
}

using SameValues = std::function<bool(const Tensor& device, const Tensor& cpu)>;

// Runs every op of the op table on cuda:0 (of the running fiber's node) and on the cpu, and
// compares outputs and gradients with `same`. With a kernel table (`kernel_table`), an op without
// kernels must be refused by name, as `gpu_kind`'s ("sim", "cuda"). Returns the ops that ran on
// the device.
inline std::vector<std::string> check_op_table_on_cuda0(bool kernel_table, const std::string& gpu_kind,
                                                        const SameValues& same) {
  const std::string refusal = "dagsim has no " + gpu_kind + " kernel for this op yet (cuda:0;";
  std::vector<std::string> ran;
  size_t ops = 0;
  for (const rpc::OpDef& op : rpc::op_table()) {
    SCOPED_TRACE(op.name);
    Prng prng(0x5eed + ops++);
    const rpc::OpExample ex = op.example(prng);
    const OpRun cpu = run_op(op, ex, Device::cpu());
    OpRun cuda;
    try {
      cuda = run_op(op, ex, Device::cuda(0));
    } catch (const Error& e) {
      // Only the kernel table refuses, and only an op (or an op it calls) without kernels.
      EXPECT_TRUE(kernel_table) << e.what();
      EXPECT_NE(e.detail().find(refusal), std::string::npos) << e.what();
      EXPECT_FALSE(has_device_kernel(op.name)) << op.name << " is listed with kernels, yet: " << e.what();
      continue;
    }
    if (cuda.outputs.size() != cpu.outputs.size() || cuda.grads.size() != cpu.grads.size()) {
      ADD_FAILURE() << "outputs or gradients differ in number";
      continue;
    }
    for (size_t i = 0; i < cpu.outputs.size(); ++i) {
      EXPECT_EQ(cuda.outputs[i].device(), Device::cuda(0)) << "output " << i;
      EXPECT_TRUE(same(cuda.outputs[i], cpu.outputs[i])) << "output " << i;
    }
    for (size_t i = 0; i < cpu.grads.size(); ++i) {
      EXPECT_EQ(cuda.grads[i].defined(), cpu.grads[i].defined()) << "gradient " << i;
      if (!cpu.grads[i].defined() || !cuda.grads[i].defined()) continue;
      EXPECT_EQ(cuda.grads[i].device(), Device::cuda(0)) << "gradient " << i;
      EXPECT_TRUE(same(cuda.grads[i], cpu.grads[i])) << "gradient " << i;
    }
    ran.push_back(op.name);
  }
  EXPECT_EQ(ops, rpc::op_table().size());
  return ran;
}

// Broadcasting, reductions over a dim, in-place updates and an MLP's training step through the
// kernel table, against the same on the cpu: what the op table's examples (equal shapes) miss.
inline std::vector<Tensor> broadcasting_and_training(Device device) {
  Prng prng(29);
  auto leaf = [&](const Shape& shape) {
    Tensor t = to_device(randn(shape, prng), device);
    t.set_requires_grad(true);
    return t;
  };
  std::vector<Tensor> out;
  Tensor a = leaf({3, 4}), b = leaf({4}), c = leaf({2, 1, 3}), d = leaf({4, 1});
  Tensor x = add(a, b);                                  // [3,4] + [4]
  Tensor y = mul(c, d);                                  // [2,1,3] * [4,1] -> [2,4,3]
  Tensor z = mul(sub(sum(y, 1), mean(y, 1, true)), 0.5);  // sum and mean over a dim
  // A 0-dim CPU tensor is a scalar argument of an op on any device, as in PyTorch; on a device
  // with kernels it is staged there first (a kernel never reads host memory).
  Tensor scaled = div(mul(x, scalar_tensor(3.0)), scalar_tensor(2.0));
  Tensor loss = add(add(sum(mul(x, x)), sum(mul(z, z))), sum(scaled));
  loss.backward();
  for (const Tensor* t : {&x, &y, &z, &loss}) out.push_back(*t);
  for (const Tensor* t : {&a, &b, &c, &d}) out.push_back(t->grad());
  {
    autograd::NoGradGuard no_grad;
    Tensor self = to_device(zeros({3, 4}), device);
    add_(self, detach(b), 0.5);                         // broadcast in place
    mul_(self, detach(a));
    sub_(self, scalar_tensor(0.25));                     // a 0-dim CPU operand in place
    out.push_back(self);
  }
  // Two steps of an MLP: linear, relu, linear, MSE; SGD in place on the weights.
  Tensor w1 = leaf({8, 4}), b1 = leaf({8}), w2 = leaf({2, 8}), b2 = leaf({2});
  Tensor input = to_device(randn({5, 4}, prng), device), target = to_device(randn({5, 2}, prng), device);
  for (int step = 0; step < 2; ++step) {
    Tensor h = relu(linear(input, w1, b1));
    Tensor l = mse_loss(linear(h, w2, b2), target);
    l.backward();
    out.push_back(l);
    autograd::NoGradGuard no_grad;
    for (Tensor* p : {&w1, &b1, &w2, &b2}) {
      add_(*p, p->grad(), -0.1);
      p->set_grad(Tensor());
    }
  }
  for (const Tensor* t : {&w1, &b1, &w2, &b2}) out.push_back(*t);
  return out;
}

// A classifier's training through every line kernel, on the shapes the op table's examples miss:
// embedding and index_select with repeated rows, layer_norm, dropout, cross_entropy, softmax and
// max along a dim with elements `inner` apart, max and min over everything with ties (in one line
// and across chunks), gather with
// repeated positions, sin, cos, dtype round trips, and three Adam steps (addcmul_).
inline std::vector<Tensor> classifier_training(Device device) {
  Prng prng(31);
  auto on = [&](const Tensor& t) { return to_device(t, device); };
  auto leaf = [&](const Shape& shape) {
    Tensor t = on(randn(shape, prng));
    t.set_requires_grad(true);
    return t;
  };
  std::vector<Tensor> out;
  Tensor emb = leaf({10, 6}), ln_w = leaf({6}), ln_b = leaf({6}), w = leaf({4, 6}), b = leaf({4});
  const Tensor tokens = on(from_values({5}, {3, 7, 3, 0, 9}));
  const Tensor targets = on(from_values({5}, {1, 0, 3, 3, 2}));
  const Tensor positions = on(from_values({5, 2}, {0, 0, 1, 3, 2, 2, 3, 0, 1, 1}));
  const Tensor rows = on(from_values({3}, {4, 1, 4}));
  // A tie for the max and min over everything: the gradient is shared.
  const Tensor tied = on(from_values({2, 3}, {1, 5, -2, 5, 0, -2}));
  // Max and min over everything across several chunks (reduce.cc's kChunk), each with a tie in
  // another chunk.
  std::vector<double> wide_values = randn({4500}, prng).to_vector();
  wide_values[100] = wide_values[2900] = 10;
  wide_values[50] = wide_values[4400] = -10;
  const Tensor wide = on(from_values({3, 1500}, wide_values));
  optim::Adam adam({emb, ln_w, ln_b, w, b}, optim::AdamOptions{.lr = 0.05});
  Prng mask(7);
  for (int step = 0; step < 3; ++step) {
    Tensor h = layer_norm(embedding(emb, tokens), {6}, ln_w, ln_b, 1e-5);
    h = dropout(h, 0.25, /*training=*/true, mask);
    Tensor logits = linear(h, w, b);
    Tensor loss = cross_entropy(logits, targets);
    Tensor p = softmax(logits, 0);
    ValuesIndices top = max(logits, 0);
    ValuesIndices low = min(logits, 1, /*keepdim=*/true);
    Tensor picked = gather(logits, 1, positions);
    Tensor sel = index_select(h, 0, rows);
    Tensor trig = to_dtype(add(sin(sel), cos(sel)), Dtype::float32);
    Tensor scaled = mul(tied, sum(p));
    Tensor total = add(add(add(loss, sum(mul(p, p))), add(sum(top.values), sum(low.values))),
                       add(add(sum(picked), sum(to_dtype(trig, Dtype::float64))),
                           add(max(scaled), min(scaled))));
    total = add(total, mean(log_softmax(logits, 0)));
    Tensor spread = mul(wide, sum(p));
    total = add(total, add(max(spread), min(spread)));
    total.backward();
    for (const Tensor* t : {&loss, &p, &top.values, &top.indices, &low.values, &low.indices, &picked, &trig, &total}) {
      out.push_back(*t);
    }
    for (const Tensor* t : {&emb, &ln_w, &ln_b, &w, &b}) out.push_back(t->grad());
    adam.step();
    for (Tensor* t : {&emb, &ln_w, &ln_b, &w, &b}) t->set_grad(Tensor());
  }
  for (const Tensor* t : {&emb, &ln_w, &ln_b, &w, &b}) out.push_back(*t);
  return out;
}

// Both workloads on cuda:0 and on the cpu, every value compared with `same`.
inline void check_workloads_on_cuda0(const SameValues& same) {
  for (auto* workload : {&broadcasting_and_training, &classifier_training}) {
    const std::vector<Tensor> cpu = workload(Device::cpu());
    const std::vector<Tensor> cuda = workload(Device::cuda(0));
    ASSERT_EQ(cuda.size(), cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(cuda[i].device(), Device::cuda(0)) << "value " << i;
      EXPECT_TRUE(same(cuda[i], cpu[i])) << "value " << i;
    }
  }
}

}  // namespace dagsim::device::testing
