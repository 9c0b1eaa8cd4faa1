// StoreHost: the fibers of a thread that serves or uses a TCPStore outside a cluster (the
// `dagsim store` command, tests, the interop client): the thread's IoScheduler, a RealClock on it
// and one ProcessNode whose Spawner runs the fibers. The node has no peers: its Transport refuses
// to send (a TCPStore speaks over its own sockets, never through dagsim's transport).
//
// run(fn) runs `fn` on a node fiber while the calling (main) context drives the I/O loop, and
// returns its result or rethrows its error. Destruction kills the node and joins its fibers.
//
// Threading: one StoreHost per thread, made and used on that thread only.
#pragma once

#include <boost/asio/io_context.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "core/runtime/env.h"
#include "net/process_node.h"
#include "net/real_clock.h"

namespace dagsim::net::tcpstore {

class StoreHost {
 public:
  // `on_failure` hears of a fiber that ended with an error (default: a line on stderr).
  explicit StoreHost(std::string name, std::function<void(const std::string&)> on_failure = nullptr);
  ~StoreHost();
  StoreHost(const StoreHost&) = delete;
  StoreHost& operator=(const StoreHost&) = delete;

  boost::asio::io_context& io() { return io_; }
  runtime::Clock& clock() { return clock_; }
  runtime::Spawner& spawner() { return *node_; }
  runtime::Env& env() { return node_->env(); }

  // Runs the I/O loop and the fibers until `done()` holds (true) or `deadline` passes (false),
  // reading `done` every `poll`.
  bool wait_until(const std::function<bool()>& done, runtime::TimePoint deadline = runtime::TimePoint::max(),
                  runtime::Duration poll = std::chrono::milliseconds(1));

  template <typename F>
  auto run(F fn) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    struct Outcome {
      bool done = false;
      std::exception_ptr error;
      std::optional<std::conditional_t<std::is_void_v<R>, bool, R>> value;
    };
    auto outcome = std::make_shared<Outcome>();
    spawner().spawn("run", [outcome, fn = std::move(fn)]() mutable {
      try {
        if constexpr (std::is_void_v<R>) {
          fn();
        } else {
          outcome->value.emplace(fn());
        }
      } catch (...) {
        outcome->error = std::current_exception();
      }
      outcome->done = true;
    });
    wait_until([&] { return outcome->done; });
    if (outcome->error) std::rethrow_exception(outcome->error);
    if constexpr (!std::is_void_v<R>) return std::move(*outcome->value);
  }

 private:
  class NoPeers;
  class QuietLog;

  boost::asio::io_context& io_;
  RealClock clock_;
  std::unique_ptr<NoPeers> transport_;
  std::unique_ptr<QuietLog> log_;
  std::unique_ptr<ProcessNode> node_;
};

}  // namespace dagsim::net::tcpstore
