#include "core/rpc/function_registry.h"

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

const RpcFunction* FunctionRegistry::find(std::string_view name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

std::vector<std::string> FunctionRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, fn] : functions_) out.push_back(name);
  return out;
}

namespace {

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

RpcFunction unary(const char* name, Unary op) {
  return [name, op](CallContext&, const CallArgs& args) {
    args.expect_tensors(name, 1);
    return std::vector<Tensor>{op(args.tensors[0])};
  };
}

RpcFunction binary(const char* name, Binary op) {
  return [name, op](CallContext&, const CallArgs& args) {
    args.expect_tensors(name, 2);
    return std::vector<Tensor>{op(args.tensors[0], args.tensors[1])};
  };
}

int64_t integer(const CallArgs& args, const char* function, const char* name, std::optional<double> fallback = {}) {
  return static_cast<int64_t>(args.attribute(function, name, fallback));
}

}  // namespace

FunctionRegistry FunctionRegistry::with_builtins() {
  FunctionRegistry r;
  r.add("add", binary("add", [](const Tensor& a, const Tensor& b) { return dagsim::add(a, b); }));
  r.add("sub", binary("sub", &sub));
  r.add("mul", binary("mul", [](const Tensor& a, const Tensor& b) { return dagsim::mul(a, b); }));
  r.add("div", binary("div", &div));
  r.add("matmul", binary("matmul", &matmul));
  r.add("mse_loss", binary("mse_loss", &mse_loss));
  r.add("neg", unary("neg", &neg));
  r.add("exp", unary("exp", &exp));
  r.add("log", unary("log", &log));
  r.add("tanh", unary("tanh", &tanh));
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
      if (args.attributes.count("dim") == 0) return std::vector<Tensor>{is_sum ? sum(args.tensors[0]) : mean(args.tensors[0])};
      const int64_t dim = integer(args, name, "dim");
      const bool keepdim = args.attribute(name, "keepdim", 0.0) != 0.0;
      return std::vector<Tensor>{is_sum ? sum(args.tensors[0], dim, keepdim) : mean(args.tensors[0], dim, keepdim)};
    });
  }
  r.add("softmax", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("softmax", 1);
    return std::vector<Tensor>{softmax(args.tensors[0], integer(args, "softmax", "dim"))};
  });
  r.add("log_softmax", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("log_softmax", 1);
    return std::vector<Tensor>{log_softmax(args.tensors[0], integer(args, "log_softmax", "dim"))};
  });
  r.add("transpose", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("transpose", 1);
    return std::vector<Tensor>{
        transpose(args.tensors[0], integer(args, "transpose", "dim0", 0), integer(args, "transpose", "dim1", 1))};
  });
  r.add("narrow", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("narrow", 1);
    return std::vector<Tensor>{narrow(args.tensors[0], integer(args, "narrow", "dim"), integer(args, "narrow", "start"),
                                      integer(args, "narrow", "length"))};
  });
  r.add("cat", [](CallContext&, const CallArgs& args) {
    if (args.tensors.empty()) throw errors::invalid_argument("cat: needs at least one tensor");
    return std::vector<Tensor>{cat(args.tensors, integer(args, "cat", "dim", 0))};
  });
  // A parameter: a fresh leaf that requires grad, from initial values (rpc.remote(owner,
  // "dagsim.parameter", {init}) gives an RRef to it, as a model's parameter RRefs).
  r.add("dagsim.parameter", [](CallContext&, const CallArgs& args) {
    args.expect_tensors("dagsim.parameter", 1);
    Tensor p = clone(detach(args.tensors[0]));
    p.set_requires_grad(true);
    return std::vector<Tensor>{p};
  });
  r.add("linear", [](CallContext&, const CallArgs& args) {
    if (args.tensors.size() != 2 && args.tensors.size() != 3) {
      throw errors::invalid_argument("linear: takes 2 or 3 tensor arguments (input, weight[, bias]), got " +
                                     std::to_string(args.tensors.size()));
    }
    return std::vector<Tensor>{linear(args.tensors[0], args.tensors[1], args.tensors.size() == 3 ? args.tensors[2] : Tensor())};
  });
  return r;
}

}  // namespace dagsim::rpc
