// ProgramSpec: the data of a `program` workload (DESIGN.md, "Scenarios"), shared by the loader,
// the runner (scenarios/program.h) and property generators: leaf tensors on the driver,
// parameters on their owners (held through RRefs), statements the driver runs in order (locally,
// by RPC, or by remote call into an RRef), the backward call and an optional optimizer stepped
// after each backward call.
//
// Every name (tensor, parameter, statement output) is either a tensor on the driver or an RRef
// owned by some worker: parameters and the results of `via = remote` are RRefs; everything else is
// a tensor. The loader guarantees the types fit (program_spec's invariants, docs/scenarios.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/optim/optimizer.h"
#include "core/rpc/message.h"
#include "core/runtime/clock.h"
#include "core/tensor/device.h"
#include "core/tensor/dtype.h"

namespace dagsim::scenarios {

struct ProgramTensor {
  // How the values are made: given in the scenario, or drawn from the scenario seed (uniform in
  // [-1, 1), or standard normal), identically for the distributed run and the local oracle.
  enum class Init : uint8_t { values, uniform, normal };
  std::string name;
  Shape shape;
  Init init = Init::values;
  std::vector<double> values;  // Init::values: row-major, numel of shape
  bool requires_grad = true;
  Dtype dtype = Dtype::float64;  // the values are rounded to it
  // Where the driver holds it in the distributed run (a GPU of the driver's); the local oracle
  // computes on the cpu, and gradients are compared by value.
  Device device = {};
};

// A parameter: a requires-grad leaf created once on its owner (remote(on, "dagsim.parameter")),
// kept for the whole run and stepped by the optimizer. Seeded values are drawn as a tensor's (from
// a stream of their own) and multiplied by `scale`.
struct ProgramParameter {
  std::string name;
  Shape shape;
  ProgramTensor::Init init = ProgramTensor::Init::values;
  std::vector<double> values;  // Init::values: row-major, numel of shape
  double scale = 1.0;          // seeded init only
  uint32_t on = 0;             // the owner
  Dtype dtype = Dtype::float64;
  // Where its owner holds it in the distributed run (a GPU of the owner's): the optimizer steps it
  // there. The local oracle holds it on the cpu.
  Device device = {};
};

// remote: the result stays on `on`, as an RRef (rpc.remote).
enum class Via : uint8_t { local, rpc_sync, rpc_async, remote };

// The pseudo-call that fetches an RRef's value to the driver (RRef::to_here); its one argument is
// in Statement::rrefs.
inline constexpr const char* kToHere = "to_here";
// The prefix of the relay functions (program.h): a relay is its op (add, sub, mul, div) forwarded
// to another node.
inline constexpr std::string_view kRelayPrefix = "relay_";

struct Statement {
  // The names it defines, one per result of the call (`out = "y"`, or `out = ["a", "b"]` for a
  // call of several results, such as split); results may go unused.
  std::vector<std::string> outs;
  std::string call;
  std::vector<std::string> args;  // tensor arguments
  std::map<std::string, double> attributes;
  Via via = Via::local;
  uint32_t on = 0;  // rpc_* and remote: the worker that runs it
  // RRef arguments, owned by the worker that runs the call; their values are appended after the
  // tensor arguments (CallArgs::rrefs).
  std::vector<std::string> rrefs = {};
  // The driver's device its tensor arguments go to before the call (to_device, differentiable): a
  // local op runs there; an RPC sends them through the driver's device map, so the callee runs it
  // on the device the map names, and results come back through the reverse map. Unset: the
  // arguments stay where they are. The local oracle ignores it.
  std::optional<Device> device = std::nullopt;

  const std::string& out() const { return outs.at(0); }  // the first (or only) name
};

// optimizer = { kind = ..., ... }: PyTorch's torch.optim.SGD or Adam with these options.
struct ProgramOptimizer {
  enum class Kind : uint8_t { sgd, adam };
  Kind kind = Kind::sgd;
  optim::SgdOptions sgd = {};
  optim::AdamOptions adam = {};
};

// message_faults = [...]: PyTorch's faulty agent on `node`: the first `count` requests of `type`
// it sends fail at once (no delay) or go out `delay` late (rpc::MessageFault).
struct ProgramMessageFault {
  uint32_t node = 0;
  rpc::MessageType type = rpc::MessageType::call;
  uint32_t count = 0;
  std::optional<runtime::Duration> delay = std::nullopt;
};

struct Program {
  uint32_t driver = 0;
  std::vector<ProgramTensor> tensors;
  std::vector<Statement> statements;
  std::vector<std::string> roots;
  bool retain_graph = false;
  uint32_t backward_calls = 1;
  // Backward calls per context (each call's forward): gradients accumulate in the context across
  // them, as PyTorch's do; all but the last retain the graph.
  uint32_t backward_repeat = 1;
  // SMART mode (dist_engine.h): only what the roots reach runs; unused RPC results are ignored.
  bool smart = false;
  std::vector<ProgramMessageFault> message_faults = {};
  std::vector<ProgramParameter> parameters = {};
  std::optional<ProgramOptimizer> optimizer = {};
  // A scalar statement output recorded after every backward call ("losses"); empty: none.
  std::string loss = {};

  // The worker that owns leaf or parameter `name`: a parameter's owner, else the driver.
  uint32_t owner_of(const std::string& name) const {
    for (const ProgramParameter& p : parameters) {
      if (p.name == name) return p.on;
    }
    return driver;
  }
};

}  // namespace dagsim::scenarios
