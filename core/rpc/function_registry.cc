#include "core/rpc/function_registry.h"

#include <algorithm>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/rpc/rpc_agent.h"
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

void FunctionRegistry::add(std::string name, RpcFunction function) {
  DAGSIM_ASSERT_MSG(!name.empty() && function, "a registered function needs a name and a body");
  const bool inserted = functions_.emplace(name, std::move(function)).second;
  DAGSIM_ASSERT_MSG(inserted, "function '" + name + "' registered twice");
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

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

RpcFunction unary(const char* name, Unary op) {
  return [name, op](CallContext&, const CallArgs& args) {
    args.expect_tensors(name, 1);
    Tensor out = op(args.tensors[0]);
    // Every unary built-in is elementwise: the caller's recv function expects that shape back.
    DAGSIM_ASSERT(out.shape() == args.tensors[0].shape());
    return std::vector<Tensor>{out};
  };
}

RpcFunction binary(const char* name, Binary op) {
  return [name, op](CallContext&, const CallArgs& args) {
    args.expect_tensors(name, 2);
    Tensor out = op(args.tensors[0], args.tensors[1]);
    DAGSIM_ASSERT(out.defined());  // ops throw on bad input; they never return nothing
    return std::vector<Tensor>{out};
  };
}

// A double attribute used as an integer (dim, start, length): it must be one.
int64_t integer(const CallArgs& args, const char* function, const char* name, std::optional<double> fallback = {}) {
  const double v = args.attribute(function, name, fallback);
  if (!(v >= -9.0e15 && v <= 9.0e15) || v != static_cast<double>(static_cast<int64_t>(v))) {
    throw errors::invalid_argument(std::string(function) + ": attribute '" + name + "' must be an integer, got " +
                                   std::to_string(v));
  }
  return static_cast<int64_t>(v);
}

}  // namespace

FunctionRegistry FunctionRegistry::with_builtins() {
  FunctionRegistry r;
  r.add("add", binary("add", [](const Tensor& a, const Tensor& b) { return dagsim::add(a, b); }));
  r.add("sub", binary("sub", &sub));
  r.add("mul", binary("mul", [](const Tensor& a, const Tensor& b) { return dagsim::mul(a, b); }));
  r.add("div", binary("div", &div));
  r.add("matmul", binary("matmul", &matmul));
  r.add("bmm", binary("bmm", &bmm));
  r.add("mse_loss", binary("mse_loss", &mse_loss));
  r.add("neg", unary("neg", &neg));
  r.add("exp", unary("exp", &exp));
  r.add("log", unary("log", &log));
  r.add("tanh", unary("tanh", &tanh));
  r.add("sin", unary("sin", &sin));
  r.add("cos", unary("cos", &cos));
  r.add("sigmoid", unary("sigmoid", &sigmoid));
  r.add("relu", unary("relu", &relu));
  r.add("clone", unary("clone", &clone));
  r.add("pow", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("pow", 1);
    return std::vector<Tensor>{pow(args.tensors[0], args.attribute("pow", "exponent"))};
  });
  for (const char* name : {"sum", "mean"}) {
    const bool is_sum = std::string_view(name) == "sum";
    r.add(name, [name, is_sum](CallContext&, const CallArgs& args) {
      args.expect_tensors(name, 1);
      if (args.attributes.count("dim") == 0) {
        Tensor all = is_sum ? sum(args.tensors[0]) : mean(args.tensors[0]);
        DAGSIM_ASSERT_EQ(all.numel(), 1);  // a full reduction is a scalar
        return std::vector<Tensor>{all};
      }
      const int64_t dim = integer(args, name, "dim");
      const bool keepdim = args.attribute(name, "keepdim", 0.0) != 0.0;
      Tensor out = is_sum ? sum(args.tensors[0], dim, keepdim) : mean(args.tensors[0], dim, keepdim);
      DAGSIM_ASSERT_EQ(out.dim(), args.tensors[0].dim() - (keepdim ? 0 : 1));
      return std::vector<Tensor>{out};
    });
  }
  r.add("softmax", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("softmax", 1);
    Tensor out = softmax(args.tensors[0], integer(args, "softmax", "dim"));
    DAGSIM_ASSERT(out.shape() == args.tensors[0].shape());
    return std::vector<Tensor>{out};
  });
  r.add("log_softmax", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("log_softmax", 1);
    Tensor out = log_softmax(args.tensors[0], integer(args, "log_softmax", "dim"));
    DAGSIM_ASSERT(out.shape() == args.tensors[0].shape());
    return std::vector<Tensor>{out};
  });
  r.add("transpose", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("transpose", 1);
    Tensor out = transpose(args.tensors[0], integer(args, "transpose", "dim0", 0), integer(args, "transpose", "dim1", 1));
    DAGSIM_ASSERT(out.numel() == args.tensors[0].numel() && out.dim() == args.tensors[0].dim());
    return std::vector<Tensor>{out};
  });
  r.add("narrow", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("narrow", 1);
    const int64_t length = integer(args, "narrow", "length");
    Tensor out = narrow(args.tensors[0], integer(args, "narrow", "dim"), integer(args, "narrow", "start"), length);
    DAGSIM_ASSERT(out.dim() == args.tensors[0].dim() && out.numel() <= args.tensors[0].numel());
    return std::vector<Tensor>{out};
  });
  r.add("cat", [](CallContext&, const CallArgs& args) {
    if (args.tensors.empty()) throw errors::invalid_argument("cat: needs at least one tensor");
    Tensor out = cat(args.tensors, integer(args, "cat", "dim", 0));
    int64_t numel = 0;
    for (const Tensor& t : args.tensors) numel += t.numel();
    DAGSIM_ASSERT_EQ(out.numel(), numel);  // nothing lost or made up
    return std::vector<Tensor>{out};
  });
  r.add("stack", [](CallContext&, const CallArgs& args) {
    if (args.tensors.empty()) throw errors::invalid_argument("stack: needs at least one tensor");
    return std::vector<Tensor>{stack(args.tensors, integer(args, "stack", "dim", 0))};
  });
  r.add("multi_dot", [](CallContext&, const CallArgs& args) {
    if (args.tensors.size() < 2) throw errors::invalid_argument("multi_dot: needs at least two tensors");
    return std::vector<Tensor>{multi_dot(args.tensors)};
  });
  // Several outputs: one tensor per piece, as torch.split and torch.chunk return a tuple.
  r.add("split", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("split", 1);
    return split(args.tensors[0], integer(args, "split", "split_size"), integer(args, "split", "dim", 0));
  });
  r.add("chunk", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("chunk", 1);
    return chunk(args.tensors[0], integer(args, "chunk", "chunks"), integer(args, "chunk", "dim", 0));
  });
  // A parameter: a fresh leaf that requires grad, from initial values (rpc.remote(owner,
  // "dagsim.parameter", {init}) gives an RRef to it, as a model's parameter RRefs).
  r.add("dagsim.parameter", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("dagsim.parameter", 1);
    Tensor p = clone(detach(args.tensors[0]));
    p.set_requires_grad(true);
    DAGSIM_ASSERT(p.requires_grad() && p.grad_fn() == nullptr);  // a leaf: gradients accumulate into it
    return std::vector<Tensor>{p};
  });
  r.add("linear", [](CallContext&, const CallArgs& args) {
    if (args.tensors.size() != 2 && args.tensors.size() != 3) {
      throw errors::invalid_argument("linear: takes 2 or 3 tensor arguments (input, weight[, bias]), got " +
                                     std::to_string(args.tensors.size()));
    }
    Tensor out = linear(args.tensors[0], args.tensors[1], args.tensors.size() == 3 ? args.tensors[2] : Tensor());
    DAGSIM_ASSERT_EQ(out.size(-1), args.tensors[1].size(0));  // one output feature per weight row
    return std::vector<Tensor>{out};
  });
  // Everything so far is a builtin op: PyTorch records a call to one only when a tensor
  // argument requires grad; any function added later is a user function (always recorded).
  for (const auto& [name, fn] : r.functions_) r.builtins_.insert(name);
  return r;
}

}  // namespace dagsim::rpc
