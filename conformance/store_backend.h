// StoreBackend: one kind of store::Store that the store conformance suite
// (store_conformance_test.cc) runs its cases against, with the runtime it lives on. Every case
// runs once per backend, so a backend is one more factory in all_store_backends():
//  - "builtin": StoreService on node 0 of a LocalRuntime, a StoreClient per client node (virtual
//    time; the store dies as its node is killed);
//  - "etcd": EtcdStore connections to a throwaway etcd (EtcdProcess) on the real runtime
//    (IoScheduler + RealClock thread); the store dies as etcd is SIGKILLed;
//  - "tcpstore": TcpStoreClients of a TcpStoreServer (PyTorch 1.13's TCPStore protocol over the
//    built-in store's table) on the real runtime; the store dies as the server closes. Its
//    protocol's gaps (StoreGaps) relax the cases that need versions shared between clients.
//
// A case sees a StoreWorld: kStoreClients clients of one fresh, empty store (each its own node or
// its own connection), a Clock, fibers beside the case's own, and a way to kill the store. The
// case body runs as a fiber; run() returns when it has ended.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "core/store/store.h"

namespace dagsim::conformance {

using runtime::Duration;
using runtime::TimePoint;

inline constexpr int kStoreClients = 3;

class StoreWorld {
 public:
  virtual ~StoreWorld() = default;

  // Client i of the store, 0 <= i < kStoreClients, with the store timeout given to run().
  virtual store::Store& client(int i) = 0;
  // The clock of the clients' runtime (virtual or real).
  virtual runtime::Clock& clock() = 0;
  // Starts `fn` on a new fiber of client i's node; it may block on any client.
  virtual void spawn(int i, std::string name, std::function<void()> fn) = 0;
  // The store dies (its node or process is killed); every later call fails.
  virtual void kill_store() = 0;
  // Words every error about this store carries ("on node 0", "etcd at 127.0.0.1:2379").
  virtual std::string store_name() const = 0;
  // How late a wake-up may come: exact in virtual time, scheduling noise on a real runtime.
  virtual Duration slack() const = 0;
};

// Where a backend's documented gaps let it keep a weaker promise than store.h's (its own header
// says why); the cases check the stronger promise only where a backend makes it.
struct StoreGaps {
  // Versions are each client's own numbering of the values it saw (TCPStore: PyTorch 1.13's
  // protocol has none): tokens are compared only within one client, and rewriting a key with the
  // value it holds is no visible change.
  bool versions_per_client = false;
  // add on a key that holds no integer fails with connection_failed (TCPStore's server closes the
  // connection: 1.13 has no error reply) instead of invalid_argument.
  bool add_error_closes_connection = false;
  // After the store died a new call may fail only at its timeout (EtcdStore retries a refused
  // connect until the deadline: the store may be restarting; TCPStore's client does while it was
  // never answered, as its server may not listen yet, and fails at once after: Note [a store that
  // served and now refuses]), not at once.
  bool refused_retried_until_timeout = false;
};

class StoreBackend {
 public:
  virtual ~StoreBackend() = default;
  virtual StoreGaps gaps() const { return {}; }
  // The backend's name in test names: letters, digits and '_' only.
  virtual std::string name() const = 0;
  // Why this machine cannot run the backend (a missing server binary), or nullopt.
  virtual std::optional<std::string> unavailable() const { return std::nullopt; }
  // Builds a fresh, empty store and its clients with store timeout `timeout`, runs `body` as a
  // fiber of client 0's node, and returns once it has ended (its failures fail the test).
  virtual void run(Duration timeout, const std::function<void(StoreWorld&)>& body) = 0;
};

// How GoogleTest prints a parameter: the backend's name.
inline void PrintTo(const std::shared_ptr<StoreBackend>& backend, std::ostream* out) { *out << backend->name(); }

// Every backend, built-in first.
std::vector<std::shared_ptr<StoreBackend>> all_store_backends();

// Runs each of `fns` on its own fiber (fns[k] on client k % kStoreClients's node) and waits until
// all have ended; an error one of them ends with fails the test, naming it. Call from a body.
void run_concurrently(StoreWorld& world, const std::vector<std::function<void()>>& fns);

}  // namespace dagsim::conformance
