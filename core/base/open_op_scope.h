// The op scope open on this OS thread (a DeviceGuard, core/tensor/device_guard.h), kept here at
// the bottom so the runtime can step out of it without knowing tensors.
//
// An op never yields, but a fiber can block while one is open: a backward node whose guard is
// open sends its gradients by RPC, and the send may wait for room. The runtime's one blocking
// point (WaitGuard, core/runtime/wait.h) takes the scope out of this slot while its fiber is away
// and puts it back when the fiber resumes, so another fiber never allocates on, or closes, a
// scope that is not its own.
#pragma once

namespace dagsim::detail {

inline void*& open_op_scope() {
  thread_local void* scope = nullptr;
  return scope;
}

}  // namespace dagsim::detail
