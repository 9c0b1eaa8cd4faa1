// EtcdProcess: a throwaway single-member etcd server (Debian's etcd-server, /usr/bin/etcd), for tests
// and for rendezvous runs over TCP with backend = "etcd" and no endpoint (the store node starts one).
// It listens on free loopback ports (client and peer) with a fresh --data-dir under /tmp, is ready
// (answers /health) when the constructor returns, and is killed (SIGKILL) and its directory removed
// when the object goes. Tests call unavailable() first and skip, naming the reason, where etcd is
// not installed.
//
// The child asks the kernel to kill it when the thread that started it exits (PR_SET_PDEATHSIG),
// so a crashed test leaves no etcd behind; start it from a thread that outlives its use (the test's
// main thread, not a short-lived runtime thread).
//
// Threading: construct, restart and destroy on one thread at a time (a test's operator thread may
// restart it while the runtime's thread uses it); kill(), pause(), resume() and endpoint() from any.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "net/etcd/etcd_http.h"

namespace dagsim::net::etcd {

class EtcdProcess {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  // Why no etcd can start here ("/usr/bin/etcd is not installed (scripts/deps.sh test)"), or nullopt.
  static std::optional<std::string> unavailable();

  // Starts etcd and waits until it is ready. Throws std::runtime_error with the tail of etcd's log
  // when it does not get ready within about 20 s (three tries, fresh ports each).
  EtcdProcess();
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  const EtcdEndpoint& endpoint() const { return endpoint_; }
  bool alive() const { return pid_ > 0; }
  // SIGKILL, then reaps it: the client port refuses connections from here on. Idempotent.
  void kill();
  // SIGSTOP / SIGCONT: a hung server, whose connections accept nothing and answer nothing.
  // pause() returns once the process has stopped, so nothing is answered after it.
  void pause();
  void resume();
  // Kills it if alive and starts a fresh one (new ports, empty data).
  void restart();
  // Kills it if alive and starts it again as an operator restarts etcd: the same ports, the same
  // data (every acknowledged write, the revision counter), ready when this returns.
  void restart_keeping_data();
  // The last lines of etcd's own log, for failure messages.
  std::string log_tail(size_t bytes = 2000) const;

 private:
  bool start_once(bool fresh);
  bool wait_ready(int milliseconds);

  std::string dir_;
  std::string log_path_;
  EtcdEndpoint endpoint_;
  uint16_t peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace dagsim::net::etcd
