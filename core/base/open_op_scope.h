// The op scope open on this OS thread (a DeviceGuard, core/tensor/device_guard.h), kept here at
// the bottom so the runtime can step out of it without knowing tensors.
//
// An op never yields, but a fiber can block while one is open: a backward node whose guard is
// open sends its gradients by RPC, and the send may wait for room. The runtime's one blocking
// point (WaitGuard, core/runtime/wait.h) takes the scope out of this slot while its fiber is away
// and puts it back when the fiber resumes, so another fiber never allocates on, or closes, a
// scope that is not its own.
//
// A scope closes differently when its op threw, which it tells by std::uncaught_exceptions. That
// count is the OS thread's, not the fiber's: while this fiber was away, another may have begun
// (or ended) unwinding and blocked in a destructor. So whoever steps a fiber out of its scopes
// and back in shifts their baselines by what changed meanwhile (ResumeScopes), and a scope's
// count stays its own fiber's.
#pragma once

#include <exception>

namespace dagsim::detail {

struct OpScope {
  OpScope* parent = nullptr;
  int uncaught_at_open = 0;  // std::uncaught_exceptions() when it opened, as its fiber counts
};

inline OpScope*& open_op_scope() {
  thread_local OpScope* scope = nullptr;
  return scope;
}

// Takes this thread's open scopes out of the slot for as long as it lives (the fiber steps out of
// them), and puts them back with their baselines shifted by the exceptions other fibers began or
// ended unwinding meanwhile.
class StepOutOfScopes {
 public:
  StepOutOfScopes() : scopes_(open_op_scope()), uncaught_(std::uncaught_exceptions()) { open_op_scope() = nullptr; }
  ~StepOutOfScopes() {
    const int shift = std::uncaught_exceptions() - uncaught_;
    for (OpScope* s = scopes_; s != nullptr; s = s->parent) s->uncaught_at_open += shift;
    open_op_scope() = scopes_;
  }
  StepOutOfScopes(const StepOutOfScopes&) = delete;
  StepOutOfScopes& operator=(const StepOutOfScopes&) = delete;

 private:
  OpScope* scopes_;
  int uncaught_;
};

}  // namespace dagsim::detail
