// GradMode: whether ops record autograd history, per fiber (torch.no_grad is per thread; a
// dagsim fiber is a logical thread). NoGradGuard disables it for a scope.
#pragma once

namespace dagsim::autograd {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: grad mode off inside the scope, restored on exit (also when unwinding).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace dagsim::autograd
