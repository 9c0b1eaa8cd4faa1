// Every registered function holds to its declared allocation bound (issue 49): the builtin ops,
// dagsim.parameter and the program's functions (relays, mlp_layer), each given generated inputs a
// peer could send (tensors within the frame limits, zero-element ones with large extents among
// them, any attribute values, NaN and 1e300 included), allocates no more tensor bytes than
// FunctionRegistry::allocation_bound says, whether it returns or refuses.
//
// The measure is allocation_budget::allocated_bytes(), which Storage counts after it has taken the
// bytes, apart from the budget's own accounting: were a function to escape its budget (a function
// registered around it, a kernel allocating through another path), the count would show it.
// RC_PARAMS="max_success=N" scales it.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/rpc/function_registry.h"
#include "core/rpc/op_table.h"
#include "core/tensor/allocation_budget.h"
#include "core/tensor/ops.h"
#include "scenarios/workloads/program/program.h"

namespace dagsim::conformance {
namespace {

rpc::FunctionRegistry all_functions() {
  rpc::FunctionRegistry r = rpc::FunctionRegistry::with_builtins();
  scenarios::add_program_functions(r);
  return r;
}

// A tensor a peer could send: any rank up to 4; sizes small, zero, or large (2^10..2^16). Past
// 4,096 elements one size becomes 0, so it carries no bytes but keeps its extents, the case a
// result-size check must see through.
// A case's tensors: of one dtype and, in half the cases, all matrices of no elements but large
// extents, [2^k, 0] (or all [0, 2^k]): the reproducer's kind, whose products ([2^k, 2^j] from
// linear) are what a bound must stop.
struct TensorStyle {
  Dtype dtype = Dtype::float64;
  bool degenerate = false;
  bool rows = true;  // [2^k, 0], else [0, 2^k]
};

TensorStyle gen_style() {
  using namespace rc;
  return {*gen::element(Dtype::float32, Dtype::float64), *gen::arbitrary<bool>(), *gen::arbitrary<bool>()};
}

Tensor gen_tensor(const TensorStyle& style) {
  using namespace rc;
  const Dtype dtype = style.dtype;
  if (style.degenerate && *gen::weightedElement<bool>({{4, true}, {1, false}})) {
    const int64_t large = int64_t{1} << *gen::inRange(13, 17);
    return style.rows ? zeros({large, 0}, dtype) : zeros({0, large}, dtype);
  }
  const auto rank = *gen::inRange<size_t>(0, 5);
  Shape shape;
  for (size_t i = 0; i < rank; ++i) {
    const int kind = *gen::weightedElement<int>({{3, 0}, {6, 1}, {3, 2}});
    if (kind == 0) shape.push_back(0);
    if (kind == 1) shape.push_back(*gen::inRange<int64_t>(1, 7));
    if (kind == 2) shape.push_back(int64_t{1} << *gen::inRange(10, 17));
  }
  int64_t numel = 1;
  for (int64_t s : shape) numel = std::min<int64_t>(numel * std::max<int64_t>(s, 1), int64_t{1} << 40);
  if (numel > 4096 && !shape.empty()) shape[*gen::inRange<size_t>(0, shape.size())] = 0;
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 4);  // valid indices too
  return from_values(shape, values, dtype);
}

double gen_attribute() {
  return *rc::gen::element<double>(0, 1, -1, 2, 3, -2, 0.5, 1024, 65536, 1 << 30, 4294967296.0, 1e300,
                                   std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity());
}

// Arguments for `name`: mostly the tensor count it takes, sometimes any; its attributes, any value.
rpc::CallArgs gen_args(const std::string& name) {
  using namespace rc;
  size_t lo = 0, hi = 4;
  std::vector<std::string> attributes;
  if (const rpc::OpDef* op = rpc::find_op(name)) {
    lo = op->min_tensors;
    hi = std::min<size_t>(op->max_tensors, 4);
    attributes = op->attributes;
  } else if (name == "mlp_layer") {
    lo = 2, hi = 3, attributes = {"activation"};
  } else if (name.starts_with(scenarios::kRelayPrefix)) {
    lo = 2, hi = 2, attributes = {"to"};
  } else if (name == "dagsim.parameter") {
    lo = 1, hi = 1;
  }
  if (*gen::weightedElement<bool>({{1, true}, {4, false}})) lo = 0, hi = 4;
  rpc::CallArgs args;
  const TensorStyle style = gen_style();
  const auto count = *gen::inRange(lo, hi + 1);
  for (size_t i = 0; i < count; ++i) args.tensors.push_back(gen_tensor(style));
  for (const std::string& a : attributes) {
    if (*gen::weightedElement<bool>({{3, true}, {1, false}})) args.attributes[a] = gen_attribute();
  }
  return args;
}

RC_GTEST_PROP(FunctionBounds, NoRegisteredFunctionAllocatesPastItsDeclaredBound, ()) {
  static const rpc::FunctionRegistry registry = all_functions();
  static const std::vector<std::string> names = registry.names();
  // Two cases in three on the functions outside the op table, which no op's result-size check
  // covers; the four relays (one function of four ops) weigh as one of the others.
  static const std::vector<std::string> others = [] {
    std::vector<std::string> out;  // each name as often as its weight
    for (const std::string& n : names) {
      if (rpc::find_op(n) == nullptr) out.insert(out.end(), n.starts_with(scenarios::kRelayPrefix) ? 1 : 4, n);
    }
    return out;
  }();
  // Several calls a case (one peer's calls in a row), so the rarer inputs are met at the default
  // 100 cases.
  for (int call = 0; call < 12; ++call) {
    const std::string name = *rc::gen::weightedElement<bool>({{2, true}, {1, false}}) ? *rc::gen::elementOf(others)
                                                                                     : *rc::gen::elementOf(names);
    rpc::CallArgs args = gen_args(name);
    // A relay with a valid `to` forwards to another node, which needs an RPC agent; a valid relay
    // is the forwarded op's own case here, and the node test (function_bounds_node_test) covers it.
    if (name.starts_with(scenarios::kRelayPrefix)) {
      const double to = args.attributes.count("to") ? args.attributes["to"] : 0;
      if (to >= 0 && to <= 65535 && to == std::floor(to)) continue;
    }
    rpc::CallContext context{nullptr, 0};
    const uint64_t before = allocation_budget::allocated_bytes();
    bool refused = false;
    try {
      (void)(*registry.find(name))(context, args);
    } catch (const Error& e) {
      refused = true;
      RC_ASSERT(e.code() != ErrorCode::internal_error);
    }
    const uint64_t allocated = allocation_budget::allocated_bytes() - before;
    RC_CLASSIFY(refused, "a call refused");
    RC_LOG() << name << " allocated " << allocated << " bytes, bound " << registry.allocation_bound(name) << "\n";
    RC_ASSERT(allocated <= registry.allocation_bound(name));
  }
}

// The reproducer's call, through the registry: mlp_layer on zero-element [2^14, 0] x [2^14, 0]
// (a [2^14, 2^14] float64 result, 2 GiB) is refused before its result is allocated.
TEST(FunctionBounds, MlpLayerOnZeroElementInputsIsRefusedBeforeItAllocates) {
  const rpc::FunctionRegistry registry = all_functions();
  for (int64_t n : {int64_t{1} << 14, int64_t{1} << 16}) {
    rpc::CallArgs args{{zeros({n, 0}, Dtype::float64), zeros({n, 0}, Dtype::float64)}, {}};
    rpc::CallContext context{nullptr, 0};
    const uint64_t before = allocation_budget::allocated_bytes();
    try {
      (void)(*registry.find("mlp_layer"))(context, args);
      ADD_FAILURE() << "mlp_layer on [" << n << ", 0] tensors was not refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("mlp_layer"), std::string::npos) << e.what();
    }
    EXPECT_LT(allocation_budget::allocated_bytes() - before, uint64_t{1} << 20);
  }
}

// A function registered by anyone is bounded without saying so, and by its own bound when it
// declares one.
TEST(FunctionBounds, AFunctionAddedLaterIsBoundedByConstruction) {
  rpc::FunctionRegistry registry;
  registry.add("big", [](rpc::CallContext&, const rpc::CallArgs&) {
    return std::vector<Tensor>{Tensor::empty({int64_t{1} << 28}, Dtype::float64)};  // 2 GiB
  });
  registry.add("small", [](rpc::CallContext&, const rpc::CallArgs&) {
    return std::vector<Tensor>{Tensor::empty({2048}, Dtype::float64)};  // 16 KiB
  }, 8192);
  rpc::CallContext context{nullptr, 0};
  EXPECT_EQ(registry.allocation_bound("big"), rpc::kDefaultCallAllocationBytes);
  const uint64_t before = allocation_budget::allocated_bytes();
  EXPECT_THROW((*registry.find("big"))(context, {}), Error);
  EXPECT_THROW((*registry.find("small"))(context, {}), Error);
  EXPECT_EQ(allocation_budget::allocated_bytes(), before);
}

}  // namespace
}  // namespace dagsim::conformance
