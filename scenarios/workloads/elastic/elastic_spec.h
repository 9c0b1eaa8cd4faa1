// ElasticSpec: the elastic workload's data ([elastic], its [elastic.model] and
// [elastic.rendezvous]; docs/scenarios.md, "Elastic training").
//
// One node hosts the built-in store (rendezvous and the checkpoint); every other node runs an
// ElasticAgent (core/elastic) whose worker group trains a multi-layer perceptron for `steps` steps
// with distributed autograd and the DistributedOptimizer. In each round, layer i lives on rank
// i mod world and rank 0 drives: it loads the last committed checkpoint, creates the parameters on
// their owners with the optimizer state, and runs the steps; a step commits when its checkpoint
// (parameters and optimizer state) is written to the store by compare-and-set on the version the
// group loaded or last wrote, so two groups can never both commit the step after the same one.
// A step's batch depends only on the seed and the step's index, so the result does not depend on
// who computed it, and the oracle is the same training on the local engine.
#pragma once

#include <cstdint>
#include <vector>

#include "core/elastic/elastic_agent.h"
#include "scenarios/workloads/program/model_spec.h"
#include "scenarios/workloads/program/program_spec.h"
#include "scenarios/workloads/rendezvous/rendezvous_spec.h"

namespace dagsim::scenarios {

struct ElasticModelLayer {
  uint32_t out = 1;
  Activation activation = Activation::none;
};

struct ElasticSpec {
  RendezvousSpec rendezvous;  // its store_node hosts the checkpoint too; no duration (training ends the job)
  elastic::ElasticAgentOptions agent;
  uint32_t input = 1;  // features
  std::vector<ElasticModelLayer> layers;
  uint32_t steps = 1;
  uint32_t batch = 1;
  ProgramOptimizer optimizer;

  bool is_agent(uint32_t node) const { return rendezvous.is_participant(node); }
  // Layer i's input width.
  uint32_t in_of(size_t layer) const { return layer == 0 ? input : layers[layer - 1].out; }
};

}  // namespace dagsim::scenarios
