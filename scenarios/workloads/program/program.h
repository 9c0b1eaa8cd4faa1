// Program: the `program` workload's model (DESIGN.md, "Scenarios"): leaf tensors on the driver,
// parameters on their owners, statements run in order by the driver (each locally, by RPC on
// another worker, or by remote call whose result stays there as an RRef), backward roots and an
// optional optimizer. The same program runs two ways: distributed (the driver's RPC agent,
// distributed autograd with one context per backward call, parameter RRefs and the
// DistributedOptimizer) and locally on the plain engine with a local optimizer, which is the
// oracle its gradients and final parameters are checked against.
//
// Statements name registered functions (core/rpc/function_registry.h) plus the ones below, so
// nothing in a program is code. A relay (`relay_add`, `relay_mul`, ...) runs on the worker it is
// sent to and forwards its op to worker `to` by a nested RPC: the nested-call case of PyTorch's
// tests. Locally a relay is just its op. `mlp_layer` is one layer of a perceptron (linear map,
// then the activation numbered by its `activation` attribute, model_spec.h's Activation).
//
// Locally, a parameter is a plain leaf, a remote call is a local call and to_here is the identity
// (so gradients flow to the same leaves); the optimizer steps with each backward call's gradients,
// as the DistributedOptimizer does with the context's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/optim/distributed_optimizer.h"
#include "core/rpc/function_registry.h"
#include "core/rpc/rpc_agent.h"
#include "scenarios/workloads/program/program_spec.h"

namespace dagsim::scenarios {

// Leaf or parameter name -> gradient (summed over the backward calls). Those without one are absent.
using Gradients = std::map<std::string, Tensor>;

struct ProgramResult {
  Gradients gradients;
  std::map<std::string, Tensor> params;  // each parameter's final value
  std::vector<double> losses;            // Program::loss after each backward call
};

// The local optimizer of `optimizer`'s kind and options over `params` (the oracle's), and the
// DistributedOptimizer's config for it.
std::unique_ptr<optim::Optimizer> make_local_optimizer(const ProgramOptimizer& optimizer, const std::vector<Tensor>& params);
optim::OptimizerConfig optimizer_config(const ProgramOptimizer& optimizer);

// Registers relay_<op> for the binary built-ins add, sub, mul, div, and mlp_layer.
void add_program_functions(rpc::FunctionRegistry& registry);

// Serves dagsim.program.gradients on `agent`'s node: the gradients a distributed autograd context
// holds there for parameters this node owns (by RRef id). Every node of a distributed run with
// parameters needs it, as it needs an optim::OptimizerHost when the program has an optimizer.
void add_gradient_service(rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd);

// The oracle: every statement local, the plain engine's backward, a local optimizer.
ProgramResult run_program_locally(const Program& program, const rpc::FunctionRegistry& registry);

// On a fiber of the driver: parameters created once on their owners, statements by their `via`,
// backward in a distributed autograd context per call, gradients from the contexts (parameters'
// from their owners), the DistributedOptimizer stepped in each context. Releases each context
// before returning. `on_backward` runs as each backward pass begins (a workload event).
// REQUIRES: the services above on every node.
ProgramResult run_program_distributed(const Program& program, rpc::RpcAgent& agent,
                                      dist_autograd::DistAutograd& autograd,
                                      const std::function<void()>& on_backward = {});

namespace detail {

// Shared by the two runs (program.cc, program_distributed.cc).
// The program's leaf tensors, with their values (materialised) and requires_grad.
// On the cpu for the local oracle; `on_devices`: each on its ProgramTensor::device.
std::map<std::string, Tensor> make_leaves(const Program& program, bool on_devices = false);
// A parameter's initial value. REQUIRES: materialised values.
Tensor initial_value(const ProgramParameter& parameter);
// Binds the results of statement `s` to its names, one each, or invalid_argument naming it when
// the counts differ.
void assign(std::map<std::string, Tensor>& values, const std::vector<Tensor>& results, const Statement& s);
// The function `name` of `registry`, or invalid_argument.
const rpc::RpcFunction& function(const rpc::FunctionRegistry& registry, const std::string& name);
// `total` += `g` (a copy when `total` has none yet).
void accumulate(Gradients& total, const std::string& name, const Tensor& g);

}  // namespace detail

}  // namespace dagsim::scenarios
