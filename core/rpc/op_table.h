// The op table: every tensor op of core/tensor that a caller may name (PyTorch's builtin ops, as
// torch.add is to rpc_sync). It is the one list: the RPC registry's builtins
// (FunctionRegistry::with_builtins), the scenario loader's `call` names and attribute keys, and the
// load-time shape inference all derive from it, and its test gradchecks every entry and calls it
// over RPC and from a scenario. An op added here is everywhere at once.
//
// Each entry says how many tensors it takes, which attributes it reads (numbers: a dim, a size, a
// probability), how to run it on CallArgs, the shapes it gives for argument shapes (nullopt where
// they do not fit: that is the run's error, with the op's own message), and an example of valid
// arguments (the tensors that require grad are the differentiable inputs) for the table's test.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/prng.h"
#include "core/rpc/function_registry.h"
#include "core/tensor/tensor.h"

namespace dagsim::rpc {

using Attributes = std::map<std::string, double>;
using OpShapes = std::optional<std::vector<Shape>>;

struct OpExample {
  std::vector<Tensor> tensors;
  Attributes attributes;
};

struct OpDef {
  static constexpr size_t kAny = std::numeric_limits<size_t>::max();

  std::string name;
  size_t min_tensors = 1;
  size_t max_tensors = 1;  // kAny: "or more"
  std::vector<std::string> attributes;
  RpcFunction run;
  // The result shapes for arguments of `shapes` (tensors in order) and `attributes`.
  std::function<OpShapes(const std::vector<Shape>& shapes, const Attributes& attributes)> shape;
  std::function<OpExample(Prng& prng)> example;
};

// Every op, in name order.
const std::vector<OpDef>& op_table();
// The op named `name`, or nullptr.
const OpDef* find_op(std::string_view name);

// A number attribute used as an integer (dim, start, length, sizes): it must be one. Throws
// invalid_argument naming the op and the attribute.
int64_t integer_attribute(const CallArgs& args, const char* op, const char* name, std::optional<double> fallback = {});

}  // namespace dagsim::rpc
