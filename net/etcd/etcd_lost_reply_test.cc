// A compare-and-set whose reply is lost after etcd applied it, and whose write another node then
// overwrote before this one could look (issue 24 item 5; found by etcd_restart_property_test as a
// hole in an etcd run's history). The store must still say its write committed, at its own
// version, by reading etcd's history back (EtcdStore::first_change_after).
//
// A proxy (plain sockets on a thread of its own) relays one store's connections to etcd. Armed, it
// lets the next txn through, waits for etcd's answer (so etcd has applied it), and then, instead of
// relaying the answer, has the other store overwrite the key and cuts the connection. Skips without
// /usr/bin/etcd.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>

#include "core/runtime/event.h"
#include "net/etcd/etcd_process.h"
#include "net/etcd/etcd_store.h"
#include "net/etcd/real_runtime_harness.h"

namespace dagsim::net::etcd {
namespace {

using namespace std::chrono_literals;

Bytes text(std::string_view s) { return Bytes(s.begin(), s.end()); }

class CuttingProxy {
 public:
  // `hook` runs on the proxy's thread once etcd has answered the armed txn, before the cut.
  CuttingProxy(uint16_t etcd_port, std::function<void()> hook) : etcd_port_(etcd_port), hook_(std::move(hook)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(0);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~CuttingProxy() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    acceptor_.join();
    for (std::thread& t : relays_) t.join();
  }
  uint16_t port() const { return port_; }
  void arm() { armed_ = true; }
  bool cut() const { return cut_; }

 private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  void accept_loop() {
    for (;;) {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;  // closed
      relays_.emplace_back([this, client] { relay(client); });
    }
  }
  void relay(int client) {
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to = loopback(etcd_port_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      ::close(client);
      ::close(server);
      return;
    }
    bool cutting = false;
    std::vector<char> buf(1 << 16);
    while (!stop_) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 100) <= 0) continue;
      if (fds[0].revents != 0) {
        const ssize_t n = ::read(client, buf.data(), buf.size());
        if (n <= 0) break;
        if (armed_ && std::string_view(buf.data(), static_cast<size_t>(n)).find("/v3/kv/txn") != std::string_view::npos) {
          armed_ = false;
          cutting = true;
        }
        if (::write(server, buf.data(), static_cast<size_t>(n)) != n) break;
      }
      if (fds[1].revents != 0) {
        const ssize_t n = ::read(server, buf.data(), buf.size());
        if (n <= 0) break;
        if (cutting) {  // etcd answered: it applied the txn; the answer never arrives
          hook_();
          cut_ = true;
          break;
        }
        if (::write(client, buf.data(), static_cast<size_t>(n)) != n) break;
      }
    }
    ::close(client);
    ::close(server);
  }

  const uint16_t etcd_port_;
  std::function<void()> hook_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false}, armed_{false}, cut_{false};
  std::thread acceptor_;
  std::vector<std::thread> relays_;  // joined at the end (the proxy lives for one test)
};

TEST(EtcdLostReply, AWriteOverwrittenBeforeItsWriterLookedStillSaysItCommitted) {
  if (const auto why = EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  EtcdProcess etcd;
  run_on_real_runtime(2, 60s, [&](RealRuntime& rt) {
    EtcdStore other(rt.io, rt.clock, EtcdStoreOptions{etcd.endpoint(), "/lost/"});
    other.set_timeout(10s);
    // The proxy's hook: let the other store overwrite the key (on the runtime's thread), then cut.
    runtime::Event overwrite;
    std::promise<void> overwritten;
    std::future<void> overwritten_future = overwritten.get_future();
    CuttingProxy proxy(etcd.endpoint().port, [&] {
      boost::asio::post(rt.io, [&] { overwrite.set(); });
      overwritten_future.wait();
    });
    EtcdStore writer(rt.io, rt.clock, EtcdStoreOptions{{"127.0.0.1", proxy.port()}, "/lost/"});
    writer.set_timeout(10s);
    writer.set("k", text("before"));
    const uint64_t before = writer.get_versioned("k").version;
    rt.nodes[1]->spawner.spawn("overwriter", [&] {
      overwrite.wait();
      other.set("k", text("theirs"));
      overwritten.set_value();
    });
    proxy.arm();
    const store::CasOutcome cas = writer.compare_set_version("k", before, text("mine"));
    EXPECT_TRUE(proxy.cut()) << "the reply was never cut: the test did not test the lost reply";
    EXPECT_TRUE(cas.written) << "etcd applied it: the writer must be told so";
    EXPECT_GT(cas.current.version, before);
    EXPECT_EQ(cas.current.value, text("mine"));
    const store::Versioned now = other.get_versioned("k");
    EXPECT_EQ(now.value, text("theirs"));
    EXPECT_GT(now.version, cas.current.version) << "its own version, below the overwrite's";
  });
}

}  // namespace
}  // namespace dagsim::net::etcd
