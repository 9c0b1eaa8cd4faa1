// FiberLocal<T>: a value each fiber sees its own copy of, default-constructed on first use.
// PyTorch keeps grad mode and the current autograd context per OS thread; dagsim runs many
// logical threads as fibers on one OS thread, so those become per fiber (a thread_local would
// leak a no_grad scope or a context id from one node's fiber into another's across a switch).
// Built on boost::fibers::fiber_specific_ptr, which works on the main fiber too.
#pragma once

#include <boost/fiber/fss.hpp>

namespace dagsim {

template <typename T>
class FiberLocal {
 public:
  FiberLocal() = default;
  FiberLocal(const FiberLocal&) = delete;
  FiberLocal& operator=(const FiberLocal&) = delete;

  T& get() {
    T* value = ptr_.get();
    if (value == nullptr) {
      value = new T();
      ptr_.reset(value);
    }
    return *value;
  }

 private:
  boost::fibers::fiber_specific_ptr<T> ptr_;
};

}  // namespace dagsim
