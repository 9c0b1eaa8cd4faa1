// FunctionRegistry: the functions a node will run for remote callers, by name.
//
// Remote calls name registered functions; nothing received over the wire is ever executed as
// code (PyTorch's RPC runs pickled Python callables, a known remote-code-execution risk we do not
// copy). A function takes tensors by position and named, typed arguments (doubles such as dim and
// keepdim, exact int64 ids and counts, strings, bytes), returns tensors, and may itself make RPCs through the agent in its CallContext: nested calls
// run on the handler's fiber, which carries the caller's autograd context as PyTorch's thread does.
// Every node of a world registers the same functions (built-in tensor ops plus whatever the
// program adds), so a name means the same thing everywhere.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/ids.h"
#include "core/rpc/codec.h"
#include "core/rpc/rref.h"
#include "core/runtime/transport.h"
#include "core/tensor/tensor.h"

namespace dagsim::rpc {

class RpcAgent;

struct CallArgs {
  std::vector<Tensor> tensors;
  std::map<std::string, double> attributes;  // ordered, so encoding is deterministic
  // RRef arguments, after the tensors. Each travels as a fork (rref.h); the callee gets its own
  // handle here. The values of those the callee owns are appended to `tensors` before the function
  // runs (PyTorch functions call rref.local_value() themselves); a builtin op, which cannot take an
  // RRef, gets every value appended, fetched from its owner for the others.
  std::vector<RRef> rrefs = {};
  // Typed arguments beyond doubles, by name (ordered, so encoding is deterministic): exact
  // integers (ids, counts), strings and bytes. A name means one type: each accessor reads its map.
  std::map<std::string, int64_t> ints = {};
  std::map<std::string, std::string> strings = {};
  std::map<std::string, runtime::Bytes> blobs = {};

  // The argument `name` of its type, or `fallback`; throws invalid_argument naming the function
  // when a required one (no fallback) is missing.
  double attribute(std::string_view function, const std::string& name, std::optional<double> fallback = {}) const;
  int64_t integer(std::string_view function, const std::string& name, std::optional<int64_t> fallback = {}) const;
  const std::string& text(std::string_view function, const std::string& name) const;
  const runtime::Bytes& blob(std::string_view function, const std::string& name) const;
  // A 64-bit id (context, optimizer, RRef), exact: an int64 argument holding its bits.
  void set_id(const std::string& name, uint64_t id) { ints[name] = static_cast<int64_t>(id); }
  uint64_t id(std::string_view function, const std::string& name) const {
    return static_cast<uint64_t>(integer(function, name));
  }
  // Exactly `n` tensors, or invalid_argument naming the function.
  void expect_tensors(std::string_view function, size_t n) const;
};

// Where a function runs: the agent serving the call (for nested RPCs) and who called. A function
// evaluated locally, outside any agent (a local oracle run), gets no agent.
struct CallContext {
  RpcAgent* agent_or_null;
  WorkerId caller;

  // REQUIRES: an agent (asserts otherwise: a function that makes RPCs cannot run locally).
  RpcAgent& agent() const;
};

using RpcFunction = std::function<std::vector<Tensor>(CallContext&, const CallArgs&)>;

// The tensor bytes one call of a function may allocate in all (allocation_budget.h), unless it
// declares its own bound: twice what a reply may carry, so a result of the largest size a reply
// takes and one temporary as large (mlp_layer's linear before its activation) fit, and a call
// whose result could never be sent back is refused before it allocates it.
inline constexpr uint64_t kDefaultCallAllocationBytes = 2 * uint64_t{CodecLimits{}.max_frame_bytes};

// `function` under the checks every callable function runs under, by construction (add() and
// RpcAgent::add_local_function wrap what they are given in it): each argument's extents (zeros as
// ones) held to what a reply could carry, and every tensor the call allocates, in the function or
// in any kernel it calls, charged to a budget of `allocation_bound` bytes before it is allocated
// (invalid_argument naming `name` past it).
RpcFunction bounded(std::string name, uint64_t allocation_bound, RpcFunction function);

class FunctionRegistry {
 public:
  // The built-in tensor ops: every op of the op table (op_table.h), and dagsim.parameter (a
  // fresh leaf that requires grad, for a model's parameter RRefs).
  static FunctionRegistry with_builtins();

  // Asserts the name is new: two meanings for one name would be a programming error. The function
  // is stored bounded() by `allocation_bound`, its declared bound: find() never returns it bare.
  void add(std::string name, RpcFunction function, uint64_t allocation_bound = kDefaultCallAllocationBytes);
  const RpcFunction* find(std::string_view name) const;
  // The declared bound of a registered function (asserts it is registered).
  uint64_t allocation_bound(std::string_view name) const;
  std::vector<std::string> names() const;
  // A builtin op of with_builtins(), not a function added after it (a user function).
  bool is_builtin(std::string_view name) const;

 private:
  std::map<std::string, RpcFunction, std::less<>> functions_;
  std::map<std::string, uint64_t, std::less<>> bounds_;
  std::set<std::string, std::less<>> builtins_;
};

}  // namespace dagsim::rpc
