// Uses the installed dagsim core: a function of its own built from dagsim ops, differentiated
// by the engine, and the gradient printed as a tensor. Exit 0 when the gradient is right.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/tensor/ops.h"
#include "core/tensor/tensor_print.h"

// The consumer's own function: f(x) = sum(tanh(x) * x).
static dagsim::Tensor my_function(const dagsim::Tensor& x) { return dagsim::sum(dagsim::mul(dagsim::tanh(x), x)); }

int main() {
  dagsim::Tensor x = dagsim::from_values({3}, {0.5, -1.0, 2.0});
  x.set_requires_grad(true);
  my_function(x).backward();
  // d/dx tanh(x) x = tanh(x) + x (1 - tanh(x)^2)
  const double v = 2.0, t = std::tanh(v);
  const double expected = t + v * (1 - t * t);
  const double got = x.grad().at({2});
  std::cout << "consumer: x.grad() = " << x.grad() << "\n";
  std::printf("consumer: grad %.12f expected %.12f\n", got, expected);
  return std::abs(got - expected) < 1e-12 ? 0 : 1;
}
