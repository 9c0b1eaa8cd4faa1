// The seed example's program (t3 = t1 + t2; t5 = t3 * t4; loss = sum(t5)) on the local autograd
// engine, with seeded values. Prints the gradients of t1, t2 and t4 and checks them against the
// closed form (d loss/d t1 = d loss/d t2 = t4, d loss/d t4 = t1 + t2). Exit 0 when they match.
// This is the main job until `dagsim run scenarios/examples/seed_example.toml` lands.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/tensor/ops.h"

int main(int argc, char** argv) {
  using namespace dagsim;
  uint64_t seed = 42;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  Prng prng(seed);
  Tensor t1 = rand_uniform({3, 3}, prng);
  Tensor t2 = rand_uniform({3, 3}, prng);
  Tensor t4 = rand_uniform({3, 3}, prng);
  for (Tensor* t : {&t1, &t2, &t4}) t->set_requires_grad(true);

  Tensor t3 = add(t1, t2);
  Tensor t5 = mul(t3, t4);
  Tensor loss = sum(t5);
  loss.backward();

  std::printf("seed %llu, loss = %.17g\n", static_cast<unsigned long long>(seed), loss.item());
  std::printf("t1.grad = %s\n", t1.grad().to_string().c_str());
  std::printf("t2.grad = %s\n", t2.grad().to_string().c_str());
  std::printf("t4.grad = %s\n", t4.grad().to_string().c_str());

  autograd::NoGradGuard no_grad;
  const bool ok = allclose(t1.grad(), t4) && allclose(t2.grad(), t4) && allclose(t4.grad(), add(t1, t2));
  std::printf("check gradients_match_closed_form: %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}
