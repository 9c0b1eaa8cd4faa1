// MlpWeights: the MLP benchmark model (8 layers, width 256, batch 64, tanh; weights
// scaled 1/16 so activations stay away from saturation), seeded so that every process that builds
// it gets the same tensors (float64, or float32 as PyTorch users train): bm_mlp.cc runs it locally and in the simulator, bm_transports.cc over
// TCP with its layers split between two processes.
#pragma once

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "core/base/prng.h"
#include "core/tensor/ops.h"

namespace dagsim::bench {

inline constexpr int kMlpLayers = 8;
inline constexpr int64_t kMlpWidth = 256;
inline constexpr int64_t kMlpBatch = 64;

struct MlpWeights {
  // The same draws in either dtype (float32: rounded from the float64 values). Another `width`
  // (BM_MlpWidth's sweep) draws [batch, width] and [width, width] from the same seed, scaled
  // 1/sqrt(width) (1/16 at 256) so the activations stay as far from saturation at every width.
  explicit MlpWeights(Dtype dtype = Dtype::float64, int64_t width = kMlpWidth) {
    Prng prng(11);
    x = to_dtype(randn({kMlpBatch, width}, prng), dtype);
    const double scale = 1.0 / std::sqrt(static_cast<double>(width));  // exactly 1/16 at 256
    for (int i = 0; i < kMlpLayers; ++i) {
      Tensor w = to_dtype(mul(randn({width, width}, prng), scale), dtype);
      w.set_requires_grad(true);
      weights.push_back(w);
    }
  }
  // The same values on `device`, the weights leaves there.
  MlpWeights on(Device device) const {
    MlpWeights copy(to_device(x, device), {});
    for (const Tensor& w : weights) {
      Tensor moved = to_device(detach(w), device);
      moved.set_requires_grad(true);
      copy.weights.push_back(moved);
    }
    return copy;
  }
  Tensor x;
  std::vector<Tensor> weights;

 private:
  MlpWeights(Tensor x, std::vector<Tensor> weights) : x(std::move(x)), weights(std::move(weights)) {}
};

// Both dtypes' models, for the processes of a distributed step: a layer runs on the model of its
// input's dtype.
struct MlpModels {
  MlpWeights f64{Dtype::float64};
  MlpWeights f32{Dtype::float32};
  // Copies on a GPU (place_on), for the layers whose input is there.
  std::optional<MlpWeights> gpu_f64, gpu_f32;
  void place_on(Device device) {
    gpu_f64 = f64.on(device);
    gpu_f32 = f32.on(device);
  }
  // Before the GPU goes (its node's clock with it).
  void release_gpu() {
    gpu_f64.reset();
    gpu_f32.reset();
  }
  const MlpWeights& of(Dtype dtype, Device device = Device::cpu()) const {
    if (!device.is_cpu()) return dtype == Dtype::float32 ? gpu_f32.value() : gpu_f64.value();
    return dtype == Dtype::float32 ? f32 : f64;
  }
};

}  // namespace dagsim::bench
