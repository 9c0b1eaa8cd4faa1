#include "core/autograd/grad_mode.h"

#include "core/base/fiber_local.h"

namespace dagsim::autograd {

namespace {
struct GradModeState {
  bool disabled = false;  // default-constructed state means "enabled"
};
FiberLocal<GradModeState>& state() {
  static FiberLocal<GradModeState> local;
  return local;
}
}  // namespace

bool GradMode::is_enabled() { return !state().get().disabled; }
void GradMode::set_enabled(bool enabled) { state().get().disabled = !enabled; }

}  // namespace dagsim::autograd
