// Future<T> / Promise<T>: a value (or an error) produced once by one fiber and awaited by others,
// possibly on other nodes' fibers. Errors travel as exceptions (dagsim::Error), as PyTorch's
// c10::ivalue::Future carries them. Waits time out through the Clock and unwind with node_killed.
//
// then(f) chains a continuation that runs when the value is ready, on a new fiber of the node
// that called then() (through its Spawner): never inline in whoever completes the promise, and so
// never on the simulator's driver, which only moves time. A promise destroyed without a value
// completes its future with broken_promise, so a waiter never hangs on a dead producer.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/base/assert.h"
#include "core/base/error.h"
#include "core/runtime/spawner.h"
#include "core/runtime/wait.h"

namespace dagsim::runtime {

template <typename T>
class Future;

namespace detail {

template <typename T>
using Stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <typename T>
struct SharedState {
  FiberMutex mutex;
  FiberCondition cv;
  bool ready = false;
  std::optional<Stored<T>> value;
  std::exception_ptr error;
  // Run once when ready; each spawns a fiber on the node that registered it.
  std::vector<std::function<void()>> continuations;

  // Publishes the value or error (already stored) under the mutex, as a waiter reads `ready`
  // under it (see Note [wake-ups under the lock] in wait.h), then runs the continuations
  // outside it: they spawn fibers, and no user code runs under a primitive's mutex.
  void complete() {
    std::vector<std::function<void()>> pending;
    {
      FiberLock lock(mutex);
      ready = true;
      cv.notify_all();
      pending = std::move(continuations);
      continuations.clear();
    }
    for (auto& c : pending) c();
  }
};

}  // namespace detail

template <typename T>
class Promise {
 public:
  Promise() : state_(std::make_shared<detail::SharedState<T>>()) {}
  Promise(Promise&&) noexcept = default;
  Promise& operator=(Promise&& other) noexcept {
    if (this != &other) {
      break_if_unset();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  Promise(const Promise&) = delete;
  Promise& operator=(const Promise&) = delete;
  ~Promise() { break_if_unset(); }

  Future<T> get_future() const { return Future<T>(state_); }

  template <typename U = T>
    requires(!std::is_void_v<U>)
  void set_value(U value) {
    auto& s = checked_state();
    s.value.emplace(std::move(value));
    s.complete();
  }
  template <typename U = T>
    requires std::is_void_v<U>
  void set_value() {
    auto& s = checked_state();
    s.value.emplace();
    s.complete();
  }
  void set_exception(std::exception_ptr error) {
    DAGSIM_ASSERT(error != nullptr);
    auto& s = checked_state();
    s.error = std::move(error);
    s.complete();
  }
  void set_error(const Error& error) { set_exception(std::make_exception_ptr(error)); }

  bool is_set() const { return state_ && state_->ready; }

 private:
  detail::SharedState<T>& checked_state() {
    DAGSIM_ASSERT(state_ != nullptr);
    DAGSIM_ASSERT_MSG(!state_->ready, "promise completed twice");
    return *state_;
  }
  void break_if_unset() {
    if (state_ && !state_->ready) {
      state_->error = std::make_exception_ptr(errors::broken_promise());
      state_->complete();
    }
  }

  std::shared_ptr<detail::SharedState<T>> state_;
};

template <typename T>
class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::SharedState<T>> state) : state_(std::move(state)) {}

  bool valid() const { return state_ != nullptr; }
  bool is_ready() const { return state_->ready; }
  bool has_error() const { return state_->ready && state_->error != nullptr; }
  std::exception_ptr error() const { return state_->error; }

  // Blocks until ready; returns the value or throws the error.
  decltype(auto) get() const {
    wait();
    return unwrap();
  }
  // As get(), but throws timed_out when `deadline` passes first.
  decltype(auto) get_until(TimePoint deadline) const {
    if (!wait_until(deadline)) throw errors::timed_out("Future::get_until");
    return unwrap();
  }

  void wait() const {
    DAGSIM_ASSERT(valid());
    FiberLock lock(state_->mutex);
    block_until(state_->cv, lock, [this] { return state_->ready; }, std::nullopt, "Future::get");
  }
  // False when `deadline` passed first.
  bool wait_until(TimePoint deadline) const {
    DAGSIM_ASSERT(valid());
    FiberLock lock(state_->mutex);
    return block_until(state_->cv, lock, [this] { return state_->ready; }, deadline, "Future::get");
  }

  // Runs `f(Future<T>)` once this future is ready, on a new fiber of the calling node in the
  // calling fiber's current scope, and returns a future of its result (an exception thrown by f
  // completes it with that exception; a scope cancelled or a node dead before then completes it
  // with `cancelled` or node_killed). REQUIRES: called from a fiber started by a Spawner.
  template <typename F>
  auto then(F&& f) const -> Future<std::invoke_result_t<F, Future<T>>> {
    using U = std::invoke_result_t<F, Future<T>>;
    DAGSIM_ASSERT(valid());
    FiberContext* self = current_fiber();
    DAGSIM_ASSERT_MSG(self != nullptr && self->spawner != nullptr,
                      "Future::then needs a fiber started by a Spawner");
    Spawner* spawner = self->spawner;
    std::shared_ptr<ScopeState> scope = self->scope;
    auto next = std::make_shared<Promise<U>>();
    Future<U> result = next->get_future();
    auto run = [spawner, scope, next, self_future = *this, fn = std::forward<F>(f)]() mutable {
      try {
      spawner->spawn_in(scope, "Future::then", [next, self_future, fn = std::move(fn)]() mutable {
        try {
          if constexpr (std::is_void_v<U>) {
            fn(self_future);
            next->set_value();
          } else {
            next->set_value(fn(self_future));
          }
        } catch (...) {
          next->set_exception(std::current_exception());
        }
      });
      } catch (...) {
        // The calling node died (or its scope was cancelled) before the value arrived: its
        // continuation cannot run.
        next->set_exception(std::current_exception());
      }
    };
    {
      FiberLock lock(state_->mutex);
      if (!state_->ready) {
        state_->continuations.push_back(std::move(run));
        return result;
      }
    }
    run();
    return result;
  }

 private:
  decltype(auto) unwrap() const {
    if (state_->error) std::rethrow_exception(state_->error);
    if constexpr (std::is_void_v<T>) {
      return;
    } else {
      return static_cast<const T&>(*state_->value);
    }
  }

  std::shared_ptr<detail::SharedState<T>> state_;
};

// A future that is already complete.
template <typename T>
Future<T> make_ready_future(T value) {
  Promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

}  // namespace dagsim::runtime
