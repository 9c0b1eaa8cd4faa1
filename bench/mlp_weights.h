// MlpWeights: the MLP benchmark model (8 layers, width 256, batch 64, tanh; weights
// scaled 1/16 so activations stay away from saturation), seeded so that every process that builds
// it gets the same tensors: bm_mlp.cc runs it locally and in the simulator, bm_transports.cc over
// TCP with its layers split between two processes.
#pragma once

#include <vector>

#include "core/base/prng.h"
#include "core/tensor/ops.h"

namespace dagsim::bench {

inline constexpr int kMlpLayers = 8;
inline constexpr int64_t kMlpWidth = 256;
inline constexpr int64_t kMlpBatch = 64;

struct MlpWeights {
  MlpWeights() {
    Prng prng(11);
    x = randn({kMlpBatch, kMlpWidth}, prng);
    for (int i = 0; i < kMlpLayers; ++i) {
      Tensor w = mul(randn({kMlpWidth, kMlpWidth}, prng), 1.0 / 16.0);
      w.set_requires_grad(true);
      weights.push_back(w);
    }
  }
  Tensor x;
  std::vector<Tensor> weights;
};

}  // namespace dagsim::bench
