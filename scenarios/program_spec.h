// ProgramSpec: the data of a `program` workload (DESIGN.md, "Scenarios"), shared by the loader,
// the runner (scenarios/program.h) and property generators: leaf tensors on the driver,
// statements the driver runs in order (locally or by RPC), and the backward call.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
};

enum class Via : uint8_t { local, rpc_sync, rpc_async };

struct Statement {
  std::string out;
  std::string call;
  std::vector<std::string> args;
  std::map<std::string, double> attributes;
  Via via = Via::local;
  uint32_t on = 0;  // rpc_*: the worker that runs it
};

struct Program {
  uint32_t driver = 0;
  std::vector<ProgramTensor> tensors;
  std::vector<Statement> statements;
  std::vector<std::string> roots;
  bool retain_graph = false;
  uint32_t backward_calls = 1;
};

}  // namespace dagsim::scenarios
