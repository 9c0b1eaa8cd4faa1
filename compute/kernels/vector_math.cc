// Capability detection and dispatch for vector_math.h.
#include "compute/kernels/vector_math.h"

#include <array>
#include <cstdlib>
#include <string>

#include "core/base/assert.h"
#include "core/base/error.h"

namespace dagsim::vec {

namespace {

constexpr std::array<std::string_view, kCapabilityCount> kNames = {"scalar", "avx2", "avx512"};

bool cpu_has_fma() { return __builtin_cpu_supports("fma") != 0; }

const KernelTable& table_for(Capability capability) {
  switch (capability) {
    case Capability::scalar:
      return cpu_has_fma() ? scalar_kernels() : scalar_nofma_kernels();
    case Capability::avx2:
      return avx2_kernels();
    case Capability::avx512:
      return avx512_kernels();
  }
  DAGSIM_UNREACHABLE();
}

Capability best_supported() {
  const std::vector<Capability> all = supported_capabilities();
  return all.back();
}

Capability initial_capability() {
  const char* forced = std::getenv("DAGSIM_CPU_CAPABILITY");
  if (forced == nullptr || *forced == '\0') return best_supported();
  const Capability capability = parse_capability(forced);
  if (!capability_supported(capability)) {
    throw errors::invalid_argument("DAGSIM_CPU_CAPABILITY=" + std::string(forced) +
                                   ": this CPU cannot run it (it can run " +
                                   std::string(capability_name(best_supported())) + " and below)");
  }
  return capability;
}

struct Active {
  Capability capability;
  const KernelTable* table;
};

Active& active() {
  static Active current = [] {
    const Capability capability = initial_capability();
    return Active{capability, &table_for(capability)};
  }();
  return current;
}

}  // namespace

std::string_view capability_name(Capability capability) {
  const auto index = static_cast<size_t>(capability);
  DAGSIM_ASSERT(index < kNames.size());
  return kNames[index];
}

Capability parse_capability(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<Capability>(i);
  }
  throw errors::invalid_argument("unknown CPU capability \"" + std::string(name) +
                                 "\" (expected scalar, avx2 or avx512)");
}

bool capability_supported(Capability capability) {
  switch (capability) {
    case Capability::scalar:
      return true;
    case Capability::avx2:
      return __builtin_cpu_supports("avx2") != 0 && cpu_has_fma();
    case Capability::avx512:
      return __builtin_cpu_supports("avx512f") != 0 && cpu_has_fma();
  }
  DAGSIM_UNREACHABLE();
}

std::vector<Capability> supported_capabilities() {
  std::vector<Capability> out;
  for (int i = 0; i < kCapabilityCount; ++i) {
    if (capability_supported(static_cast<Capability>(i))) out.push_back(static_cast<Capability>(i));
  }
  return out;
}

Capability capability() { return active().capability; }

void set_capability(Capability capability) {
  if (!capability_supported(capability)) {
    throw errors::invalid_argument("CPU capability " + std::string(capability_name(capability)) +
                                   ": this CPU cannot run it");
  }
  active() = Active{capability, &table_for(capability)};
}

void unary(Unary op, const float* x, float* y, int64_t n) {
  active().table->unary_f32[static_cast<int>(op)](x, y, n);
}
void unary(Unary op, const double* x, double* y, int64_t n) {
  active().table->unary_f64[static_cast<int>(op)](x, y, n);
}
void binary(Binary op, const float* a, const float* b, float* out, int64_t n) {
  active().table->binary_f32[static_cast<int>(op)](a, b, out, n);
}
void binary(Binary op, const double* a, const double* b, double* out, int64_t n) {
  active().table->binary_f64[static_cast<int>(op)](a, b, out, n);
}
void axpy(double alpha, const float* other, float* self, int64_t n) {
  active().table->axpy_f32(alpha, other, self, n);
}
void axpy(double alpha, const double* other, double* self, int64_t n) {
  active().table->axpy_f64(alpha, other, self, n);
}
void softmax_row(bool log_form, const float* x, float* y, int64_t n) {
  active().table->softmax_row_f32(log_form, x, y, n);
}
void softmax_row(bool log_form, const double* x, double* y, int64_t n) {
  active().table->softmax_row_f64(log_form, x, y, n);
}
void softmax_backward_row(bool log_form, const float* out, const float* g, float* dx, int64_t n) {
  active().table->softmax_backward_row_f32(log_form, out, g, dx, n);
}
void softmax_backward_row(bool log_form, const double* out, const double* g, double* dx, int64_t n) {
  active().table->softmax_backward_row_f64(log_form, out, g, dx, n);
}
void layer_norm_row(const float* x, const double* w, const double* b, float* y, int64_t n, double eps, double* mean,
                    double* rstd) {
  active().table->layer_norm_row_f32(x, w, b, y, n, eps, mean, rstd);
}
void layer_norm_row(const double* x, const double* w, const double* b, double* y, int64_t n, double eps,
                    double* mean, double* rstd) {
  active().table->layer_norm_row_f64(x, w, b, y, n, eps, mean, rstd);
}
void layer_norm_backward_row(const float* g, const float* x, const float* w, float* dx, float* dw, int64_t n,
                             double mean, double rstd) {
  active().table->layer_norm_backward_row_f32(g, x, w, dx, dw, n, mean, rstd);
}
void layer_norm_backward_row(const double* g, const double* x, const double* w, double* dx, double* dw, int64_t n,
                             double mean, double rstd) {
  active().table->layer_norm_backward_row_f64(g, x, w, dx, dw, n, mean, rstd);
}

void layer_norm_weight_row(const float* g, const float* x, double mean, double rstd, float* acc, int64_t n) {
  active().table->layer_norm_weight_row_f32(g, x, mean, rstd, acc, n);
}
void layer_norm_weight_row(const double* g, const double* x, double mean, double rstd, double* acc, int64_t n) {
  active().table->layer_norm_weight_row_f64(g, x, mean, rstd, acc, n);
}

int64_t extremum_row(bool is_max, const float* x, int64_t n) { return active().table->extremum_row_f32(is_max, x, n); }
int64_t extremum_row(bool is_max, const double* x, int64_t n) { return active().table->extremum_row_f64(is_max, x, n); }

}  // namespace dagsim::vec
