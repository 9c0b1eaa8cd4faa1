// EtcdProcess: a throwaway single-member etcd server (Debian's etcd-server, /usr/bin/etcd), for tests
// and for rendezvous runs over TCP with backend = "etcd" and no endpoint (the store node starts one).
// It listens on free loopback ports (client and peer) with a fresh --data-dir under /tmp, is ready
// (answers /health) when the constructor returns, and is killed (SIGKILL) and its directory removed
// when the object goes. Tests call unavailable() first and skip, naming the reason, where etcd is
// not installed.
//
// It is started through net/process (process.h): it dies with the process that started it, SIGKILL
// included, so a crashed test or node leaves no etcd behind.
//
// Threading: construct, restart and destroy on one thread at a time (a test's operator thread may
// restart it while the runtime's thread uses it); kill(), pause(), resume() and endpoint() from any.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "net/etcd/etcd_http.h"
#include "net/process/process.h"

namespace dagsim::net::etcd {

class EtcdProcess {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  // Why no etcd can start here ("/usr/bin/etcd is not installed (scripts/deps.sh test)"), or nullopt.
  static std::optional<std::string> unavailable();

  // Starts etcd and waits until it is ready. Throws dagsim::Error: invalid_argument when etcd is
  // not installed or cannot start (naming why), timed_out with the tail of etcd's log when it does
  // not get ready within about 20 s (three tries, fresh ports each).
  EtcdProcess();
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  const EtcdEndpoint& endpoint() const { return endpoint_; }
  bool alive() const { return process_.running(); }
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
  Process process_;
};

}  // namespace dagsim::net::etcd
