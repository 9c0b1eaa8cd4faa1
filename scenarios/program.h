// Program: the `program` workload's model (DESIGN.md, "Scenarios"): leaf tensors on the driver,
// statements run in order by the driver, each locally or by RPC on another worker, and backward
// roots. The same program runs two ways: distributed (the driver's RPC agent and distributed
// autograd, one context per backward call) and locally on the plain engine, which is the oracle
// its gradients are checked against.
//
// Statements name registered functions (core/rpc/function_registry.h) plus the relays below, so
// nothing in a program is code. A relay (`relay_add`, `relay_mul`, ...) runs on the worker it is
// sent to and forwards its op to worker `to` by a nested RPC: the nested-call case of PyTorch's
// tests. Locally a relay is just its op.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/rpc_agent.h"
#include "scenarios/program_spec.h"

namespace dagsim::scenarios {

// Leaf name -> gradient (summed over the backward calls). Leaves without one are absent.
using Gradients = std::map<std::string, Tensor>;

// Registers relay_<op> for the binary built-ins add, sub, mul, div.
void add_program_functions(rpc::FunctionRegistry& registry);

// The oracle: every statement local, the plain engine's backward.
Gradients run_program_locally(const Program& program, const rpc::FunctionRegistry& registry);

// On a fiber of the driver: statements by their `via`, backward in a distributed autograd
// context per call, gradients from the context. Releases each context before returning.
Gradients run_program_distributed(const Program& program, rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd);

}  // namespace dagsim::scenarios
