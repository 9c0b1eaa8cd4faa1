// Tests of the op table (op_table.h), by enumerating it: every op is a builtin of the registry,
// its backward passes gradcheck on its example for every differentiable input, its inferred
// shapes are the shapes it gives, it runs over RPC with the local result, and it refuses a wrong
// number of tensors by name. A new op is tested here the moment it is in the table.
#include "core/rpc/op_table.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/base/throws_error_test_util.h"
#include "core/fibers/local_runtime.h"
#include "core/rpc/rpc_agent.h"
#include "core/tensor/gradcheck.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {
namespace {

OpExample example_of(const OpDef& op) {
  Prng prng(0x0b7a'b1e0 + std::hash<std::string>{}(op.name) % 1000);
  return op.example(prng);
}

std::vector<Tensor> run_locally(const OpDef& op, std::vector<Tensor> tensors, const Attributes& attributes) {
  CallContext local{nullptr, 0};
  CallArgs args;
  args.tensors = std::move(tensors);
  args.attributes = attributes;
  return op.run(local, args);
}

TEST(OpTable, IsSortedWithEveryOpABuiltinOfTheRegistry) {
  const std::vector<OpDef>& table = op_table();
  ASSERT_GE(table.size(), 30u);
  const FunctionRegistry registry = FunctionRegistry::with_builtins();
  for (size_t i = 0; i < table.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(table[i - 1].name, table[i].name) << "sorted and unique";
    }
    EXPECT_NE(registry.find(table[i].name), nullptr) << table[i].name;
    EXPECT_TRUE(registry.is_builtin(table[i].name)) << table[i].name;
    EXPECT_EQ(find_op(table[i].name), &table[i]);
  }
  EXPECT_EQ(find_op("os.system"), nullptr);
}

TEST(OpTable, EveryOpPassesGradcheckOnEachDifferentiableInput) {
  for (const OpDef& op : op_table()) {
    const OpExample ex = example_of(op);
    std::vector<size_t> differentiable;
    for (size_t i = 0; i < ex.tensors.size(); ++i) {
      if (ex.tensors[i].requires_grad()) differentiable.push_back(i);
    }
    ASSERT_FALSE(differentiable.empty()) << op.name << ": its example has no input that requires grad";
    std::vector<Tensor> inputs;
    for (size_t i : differentiable) inputs.push_back(ex.tensors[i]);
    const auto fn = [&](const std::vector<Tensor>& xs) {
      std::vector<Tensor> all = ex.tensors;
      for (size_t k = 0; k < differentiable.size(); ++k) all[differentiable[k]] = xs[k];
      return run_locally(op, all, ex.attributes);
    };
    const GradcheckResult r = gradcheck(fn, inputs);
    EXPECT_TRUE(r.passed) << op.name << ": " << r.message;
  }
}

TEST(OpTable, EveryOpsInferredShapesAreTheShapesItGives) {
  for (const OpDef& op : op_table()) {
    const OpExample ex = example_of(op);
    std::vector<Shape> shapes;
    for (const Tensor& t : ex.tensors) shapes.push_back(t.shape());
    const OpShapes inferred = op.shape(shapes, ex.attributes);
    ASSERT_TRUE(inferred.has_value()) << op.name << ": no shape inferred for its own example";
    const std::vector<Tensor> out = run_locally(op, ex.tensors, ex.attributes);
    ASSERT_EQ(inferred->size(), out.size()) << op.name;
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ((*inferred)[i], out[i].shape()) << op.name << " output " << i;
  }
}

TEST(OpTable, EveryOpRefusesAWrongNumberOfTensorsByName) {
  for (const OpDef& op : op_table()) {
    const OpExample ex = example_of(op);
    if (op.min_tensors > 0) {
      std::vector<Tensor> fewer(ex.tensors.begin(), ex.tensors.begin() + static_cast<std::ptrdiff_t>(op.min_tensors - 1));
      EXPECT_TRUE(throws_error([&] { run_locally(op, fewer, ex.attributes); }, ErrorCode::invalid_argument,
                               {op.name + ": takes "}))
          << op.name;
    }
    if (op.max_tensors != OpDef::kAny) {
      std::vector<Tensor> more = ex.tensors;
      while (more.size() <= op.max_tensors) more.push_back(ex.tensors[0]);
      EXPECT_TRUE(throws_error([&] { run_locally(op, more, ex.attributes); }, ErrorCode::invalid_argument,
                               {op.name + ": takes "}))
          << op.name;
    }
  }
}

TEST(OpTable, EveryOpRunsOverRpcWithTheLocalResult) {
  fibers::LocalRuntime rt;
  const FunctionRegistry registry = FunctionRegistry::with_builtins();
  std::vector<std::unique_ptr<RpcAgent>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(std::make_unique<RpcAgent>(rt.add_node("worker" + std::to_string(i)), registry));
    agents.back()->start();
  }
  rt.run_on(0, [&] {
    for (const OpDef& op : op_table()) {
      const OpExample ex = example_of(op);
      CallArgs args;
      args.tensors = ex.tensors;
      args.attributes = ex.attributes;
      const std::vector<Tensor> remote = agents[0]->rpc_sync(1, op.name, args);
      const std::vector<Tensor> local = run_locally(op, ex.tensors, ex.attributes);
      ASSERT_EQ(remote.size(), local.size()) << op.name;
      for (size_t i = 0; i < local.size(); ++i) EXPECT_EQ(remote[i].to_vector(), local[i].to_vector()) << op.name;
    }
  });
  for (WorkerId w = 0; w < 2; ++w) rt.kill(w);
  rt.run();
}

}  // namespace
}  // namespace dagsim::rpc
