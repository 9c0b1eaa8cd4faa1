// ModelSpec: the `model` + `train` workload (DESIGN.md, "Scenarios"): a multi-layer perceptron
// whose layers live on given workers, trained for `steps` steps on one fixed, seeded batch with
// the DistributedOptimizer. It is not run as such: compile_model turns it into the Program that
// says exactly that, so one workload (ProgramWorkload) and one oracle serve both.
//
// The compiled program (names are 1-based by layer):
//   x [batch, input], y [batch, out of the last layer]: seeded uniform leaves on the driver,
//     requires_grad = false (the batch is fixed; each step trains on it);
//   w<i> [out, in], b<i> [out]: parameters owned by layer i's worker, seeded uniform in
//     [-1/sqrt(in), 1/sqrt(in)) (PyTorch's nn.Linear bound);
//   h<i> = mlp_layer(h<i-1> (x for the first), w<i>, b<i>, activation): one call per layer on its
//     owner, by rpc_sync (local when the owner is the driver), with the parameters as RRef args;
//   loss = mse_loss(h<last>, y) on the driver; backward from loss once per step; the optimizer
//     steps after each backward; `loss` is recorded per step.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "scenarios/workloads/program/program_spec.h"

namespace dagsim::scenarios {

// The activation after a layer's linear map; mlp_layer's `activation` attribute is its number.
enum class Activation : uint8_t { none, tanh, relu, sigmoid };
// Their names in a scenario file, in the enum's order (the model and elastic workloads' layers).
inline constexpr std::array<std::string_view, 4> kActivationNames = {"none", "tanh", "relu", "sigmoid"};

struct ModelLayer {
  uint32_t out = 1;
  uint32_t on = 0;
  Activation activation = Activation::none;
};

struct ModelSpec {
  uint32_t input = 1;  // features
  std::vector<ModelLayer> layers;
  uint32_t driver = 0;
  uint32_t steps = 1;
  uint32_t batch = 1;
  ProgramOptimizer optimizer;
};

// The program above. REQUIRES: at least one layer.
Program compile_model(const ModelSpec& model);

// The model workload's spec: the model as written and the program it compiles to, which is what
// runs (the program workload's node side and judge serve both).
struct ModelProgram {
  ModelSpec model;
  Program program;
};

}  // namespace dagsim::scenarios
