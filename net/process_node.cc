#include "net/process_node.h"

#include <boost/fiber/condition_variable.hpp>
#include <boost/fiber/mutex.hpp>

namespace dagsim::net {

namespace {
constexpr uint64_t kNodeRandomStream = 0x70de;
constexpr size_t kStackBytes = 256 * 1024;
}  // namespace

ProcessNode::ProcessNode(std::string name, WorkerId id, uint32_t incarnation, uint64_t seed, runtime::Clock& clock,
                         runtime::Transport& transport, runtime::Log& log, fibers::NodeFibers::OnFailure on_failure)
    : name_(std::move(name)), random_(Prng(seed).fork(kNodeRandomStream + (uint64_t{id} << 20) + incarnation)),
      env_{id, name_, clock, transport, *this, random_, log, incarnation, {}},
      fibers_(name_, clock, *this, live_, kStackBytes, std::move(on_failure)) {}

void ProcessNode::spawn_in(std::shared_ptr<runtime::ScopeState> scope, std::string name, std::function<void()> fn) {
  fibers_.spawn(std::move(scope), std::move(name), std::move(fn));
}

bool ProcessNode::kill_and_join(runtime::Duration limit) {
  fibers_.kill();
  return wait_on_main(env_.clock, [this] { return live_ == 0; }, env_.clock.now() + limit);
}

bool wait_on_main(runtime::Clock& clock, const std::function<bool()>& done, runtime::TimePoint deadline,
                  runtime::Duration poll) {
  boost::fibers::mutex mutex;
  boost::fibers::condition_variable cv;
  while (!done()) {
    if (clock.now() >= deadline) return false;
    bool woke = false;
    const runtime::TimerId timer = clock.call_at(clock.now() + poll, [&] {
      std::unique_lock lock(mutex);
      woke = true;
      cv.notify_all();
    });
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return woke; });
    lock.unlock();
    clock.cancel(timer);
  }
  return true;
}

}  // namespace dagsim::net
