#include "net/tcpstore/store_host.h"

#include <iostream>

#include "core/base/error.h"
#include "net/io_scheduler.h"

namespace dagsim::net::tcpstore {

// A transport with no peers: nothing of a TCPStore travels through it.
class StoreHost::NoPeers final : public runtime::Transport {
 public:
  WorkerId self() const override { return 0; }
  using runtime::Transport::send;
  void send(WorkerId target, runtime::Bytes, uint64_t) override {
    throw errors::invalid_argument("a store host has no peers (send to node " + std::to_string(target) + ")");
  }
  runtime::Channel<runtime::Delivery>& inbox() override { return inbox_; }
  void close() override { inbox_.close(); }

 private:
  runtime::Channel<runtime::Delivery> inbox_;
};

class StoreHost::QuietLog final : public runtime::Log {
 public:
  void event(std::string_view, std::string_view) override {}
};

StoreHost::StoreHost(std::string name, std::function<void(const std::string&)> on_failure)
    : io_(IoScheduler::for_this_thread().io()), clock_(io_), transport_(std::make_unique<NoPeers>()),
      log_(std::make_unique<QuietLog>()) {
  if (!on_failure) on_failure = [](const std::string& line) { std::cerr << line << "\n"; };
  node_ = std::make_unique<ProcessNode>(
      name, 0, 0, 1, clock_, *transport_, *log_,
      [name, on_failure](const runtime::FiberContext& fiber, std::string what) {
        on_failure(name + ": fiber " + fiber.fiber_name + " failed: " + what);
      });
}

StoreHost::~StoreHost() {
  node_->kill_and_join(std::chrono::seconds(5));
  transport_->close();
}

bool StoreHost::wait_until(const std::function<bool()>& done, runtime::TimePoint deadline, runtime::Duration poll) {
  return wait_on_main(clock_, done, deadline, poll);
}

}  // namespace dagsim::net::tcpstore
