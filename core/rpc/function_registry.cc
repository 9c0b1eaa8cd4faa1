#include "core/rpc/function_registry.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/rpc/codec.h"
#include "core/rpc/op_table.h"
#include "core/rpc/rpc_agent.h"
#include "core/tensor/allocation_budget.h"
#include "core/tensor/ops.h"

namespace dagsim::rpc {

double CallArgs::attribute(std::string_view function, const std::string& name, std::optional<double> fallback) const {
  auto it = attributes.find(name);
  if (it != attributes.end()) return it->second;
  if (fallback) return *fallback;
  throw errors::invalid_argument(std::string(function) + ": missing attribute '" + name + "'");
}

namespace {

// The value under `name` in one typed map, or invalid_argument naming the function and saying
// where else the name is (a caller that passed it with the wrong type).
template <typename Map>
const typename Map::mapped_type& typed(const CallArgs& args, const Map& map, std::string_view function,
                                       const std::string& name, const char* type) {
  auto it = map.find(name);
  if (it != map.end()) return it->second;
  const bool elsewhere = args.attributes.count(name) + args.ints.count(name) + args.strings.count(name) +
                             args.blobs.count(name) != 0;
  throw errors::invalid_argument(std::string(function) + ": missing " + type + " argument '" + name + "'" +
                                 (elsewhere ? " (it was passed with another type)" : ""));
}

}  // namespace

int64_t CallArgs::integer(std::string_view function, const std::string& name, std::optional<int64_t> fallback) const {
  if (fallback && ints.count(name) == 0) return *fallback;
  return typed(*this, ints, function, name, "int64");
}

const std::string& CallArgs::text(std::string_view function, const std::string& name) const {
  return typed(*this, strings, function, name, "string");
}

const runtime::Bytes& CallArgs::blob(std::string_view function, const std::string& name) const {
  return typed(*this, blobs, function, name, "bytes");
}

void CallArgs::expect_tensors(std::string_view function, size_t n) const {
  if (tensors.size() != n) {
    throw errors::invalid_argument(std::string(function) + ": takes " + std::to_string(n) + " tensor argument(s), got " +
                                   std::to_string(tensors.size()));
  }
}

RpcAgent& CallContext::agent() const {
  DAGSIM_ASSERT_MSG(agent_or_null != nullptr, "this function makes RPCs and cannot run without an RPC agent");
  return *agent_or_null;
}

void FunctionRegistry::add(std::string name, RpcFunction function, uint64_t allocation_bound) {
  DAGSIM_ASSERT_MSG(!name.empty() && function, "a registered function needs a name and a body");
  RpcFunction checked = bounded(name, allocation_bound, std::move(function));
  const bool inserted = functions_.emplace(name, std::move(checked)).second;
  DAGSIM_ASSERT_MSG(inserted, "function '" + name + "' registered twice");
  bounds_.emplace(name, allocation_bound);
}

uint64_t FunctionRegistry::allocation_bound(std::string_view name) const {
  auto it = bounds_.find(name);
  DAGSIM_ASSERT_MSG(it != bounds_.end(), "no function '" + std::string(name) + "' registered");
  return it->second;
}

bool FunctionRegistry::is_builtin(std::string_view name) const { return builtins_.find(name) != builtins_.end(); }

const RpcFunction* FunctionRegistry::find(std::string_view name) const {
  auto it = functions_.find(name);
  if (it == functions_.end()) return nullptr;
  DAGSIM_ASSERT(it->second != nullptr);  // add() refuses empty bodies
  return &it->second;
}

std::vector<std::string> FunctionRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, fn] : functions_) out.push_back(name);
  // In name order (the map's), so error texts that list them are deterministic.
  DAGSIM_ASSERT(std::is_sorted(out.begin(), out.end()));
  return out;
}

namespace {

// A zero-element argument still has extents a kernel walks: [2^61, 1, 0, 2] is batches, rows or
// lanes by the 2^61 (the execute fuzzer found matmul and softmax looping for ever on such), which
// no allocation bound sees. An argument is held to what a reply could carry of it were its zeros
// ones, whatever the function.
void check_argument_extents(const std::string& function, const CallArgs& args) {
  const uint64_t lanes = CodecLimits{}.max_frame_bytes / dtype_size(Dtype::float32);
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    if (!args.tensors[i].defined()) continue;  // an absent optional (a bias)
    const Shape& shape = args.tensors[i].shape();
    uint64_t extent = 1;
    for (int64_t s : shape) {
      if (s != 0 && __builtin_mul_overflow(extent, static_cast<uint64_t>(s), &extent)) extent = lanes + 1;
      if (extent > lanes) {
        throw errors::invalid_argument(function + ": argument " + std::to_string(i) + " has shape " + shape_str(shape) +
                                       ", whose sizes (zeros aside) multiply past the " + std::to_string(lanes) +
                                       " a call may take");
      }
    }
  }
}

}  // namespace

RpcFunction bounded(std::string name, uint64_t allocation_bound, RpcFunction function) {
  DAGSIM_ASSERT(function != nullptr);
  return [name = std::move(name), allocation_bound, function = std::move(function)](CallContext& context,
                                                                                      const CallArgs& args) {
    check_argument_extents(name, args);
    allocation_budget::Scope budget(name, allocation_bound);
    return function(context, args);
  };
}

namespace {

// A builtin op's results, known from its arguments' shapes before it runs, must fit a reply: a
// peer's call on a zero-element tensor ([0, 2^40]: no bytes on the wire) may ask for a result of
// any size ([2^40] from sum over dim 0, [2^20, 2^20] from mm of [2^20, 0] and [0, 2^20]), which
// could never be sent back and would only exhaust this node.
void check_result_size(const OpDef& op, const CallArgs& args) {
  std::vector<Shape> shapes;
  shapes.reserve(args.tensors.size());
  Dtype widest = Dtype::float32;
  for (const Tensor& t : args.tensors) {
    shapes.push_back(t.shape());
    if (t.dtype() == Dtype::float64) widest = Dtype::float64;
  }
  // The shape functions index their arguments: a wrong count is the op's own error to name.
  if (shapes.size() < op.min_tensors || (op.max_tensors != OpDef::kAny && shapes.size() > op.max_tensors)) return;
  const OpShapes results = op.shape(shapes, args.attributes);
  if (!results) return;  // the arguments do not fit: the op's own error says why
  const CodecLimits limits;
  if (results->size() > limits.max_tensors) {
    throw errors::invalid_argument(op.name + ": it would give more than " + std::to_string(limits.max_tensors) +
                                   " results, more than a reply may carry");
  }
  // Elements in all, at the widest argument's size (results take their arguments' dtype).
  const uint64_t limit = limits.max_frame_bytes / dtype_size(widest);
  uint64_t total = 0;
  for (const Shape& shape : *results) {
    uint64_t numel = limit + 1;  // a shape past int64 is certainly too big
    try {
      numel = static_cast<uint64_t>(shape_numel(shape));
    } catch (const Error&) {
    }
    total = numel > limit ? limit + 1 : total + numel;
    if (total > limit) {
      throw errors::invalid_argument(op.name + ": its result" + (results->size() > 1 ? "s" : "") +
                                     " would have shape " + shape_str(shape) +
                                     (results->size() > 1 ? " among others" : "") + ", more than the " +
                                     std::to_string(limits.max_frame_bytes >> 20) + " MiB a reply may carry");
    }
  }
}

}  // namespace

FunctionRegistry FunctionRegistry::with_builtins() {
  FunctionRegistry r;
  for (const OpDef& op : op_table()) {
    // op_table() is built once and never changes: its entries outlive every registry.
    r.add(op.name, [&op](CallContext& context, const CallArgs& args) {
      check_result_size(op, args);
      return op.run(context, args);
    });
  }
  // A parameter: a fresh leaf that requires grad, from initial values (rpc.remote(owner,
  // "dagsim.parameter", {init}) gives an RRef to it, as a model's parameter RRefs). The string
  // argument "device" ("cuda:0") puts it on one of the owner's devices, as model.to(device) does
  // on the owner; the initial values travel as host values.
  r.add("dagsim.parameter", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("dagsim.parameter", 1);
    Tensor init = detach(args.tensors[0]);
    if (args.strings.contains("device")) init = to_device(init, parse_device(args.text("dagsim.parameter", "device")));
    Tensor p = clone(init);
    p.set_requires_grad(true);
    DAGSIM_ASSERT(p.requires_grad() && p.grad_fn() == nullptr);  // a leaf: gradients accumulate into it
    return std::vector<Tensor>{p};
  });
  // Everything so far is a builtin op: PyTorch records a call to one only when a tensor
  // argument requires grad; any function added later is a user function (always recorded).
  for (const auto& [name, fn] : r.functions_) r.builtins_.insert(name);
  return r;
}

}  // namespace dagsim::rpc
