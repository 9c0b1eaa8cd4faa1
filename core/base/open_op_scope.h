// The op scope open on this OS thread (a DeviceGuard, core/tensor/device_guard.h), kept here at
// the bottom so the runtime can step out of it without knowing tensors.
//
// An op never yields, but a fiber can block while one is open: a backward node whose guard is
// open sends its gradients by RPC, and the send may wait for room. The runtime's one blocking
// point (WaitGuard, core/runtime/wait.h) takes the scope out of this slot while its fiber is away
// and puts it back when the fiber resumes, so another fiber never allocates on, or closes, a
// scope that is not its own.
//
// A scope closes differently when its op threw, which it tells by how many exceptions are in
// flight. std::uncaught_exceptions counts the OS thread's, not the fiber's: while this fiber was
// away, another may have begun (or ended) unwinding and blocked in a destructor. So the blocking
// point brackets each switch of fibers (FiberSwitch): what the count changed by while the fiber
// was away is other fibers' doing, and own_uncaught_exceptions() leaves it out.
#pragma once

#include <exception>

namespace dagsim::detail {

struct OpScope {
  OpScope* parent = nullptr;
  int uncaught_at_open = 0;  // own_uncaught_exceptions() when it opened
};

inline OpScope*& open_op_scope() {
  thread_local OpScope* scope = nullptr;
  return scope;
}

// How many of the exceptions in flight on this thread belong to other fibers than the running one:
// each fiber's own value, which FiberSwitch keeps across its switches.
inline int& others_uncaught_exceptions() {
  thread_local int others = 0;
  return others;
}

// The exceptions in flight in the running fiber itself.
inline int own_uncaught_exceptions() { return std::uncaught_exceptions() - others_uncaught_exceptions(); }

// Around one switch away from the running fiber and back (a condition variable's wait): when it
// resumes, the exceptions that began or ended meanwhile are other fibers'.
class FiberSwitch {
 public:
  FiberSwitch() : others_(others_uncaught_exceptions()), before_(std::uncaught_exceptions()) {}
  // Call as soon as the fiber runs again, before it can throw.
  void resumed() const { others_uncaught_exceptions() = others_ + (std::uncaught_exceptions() - before_); }

 private:
  int others_;
  int before_;
};

// Takes this thread's open scopes out of the slot for as long as it lives (the fiber steps out of
// them: it blocks, or allocates on the host on purpose), and puts them back.
class StepOutOfScopes {
 public:
  StepOutOfScopes() : scopes_(open_op_scope()) { open_op_scope() = nullptr; }
  ~StepOutOfScopes() { open_op_scope() = scopes_; }
  StepOutOfScopes(const StepOutOfScopes&) = delete;
  StepOutOfScopes& operator=(const StepOutOfScopes&) = delete;

 private:
  OpScope* scopes_;
};

}  // namespace dagsim::detail
