// From rendezvous parameters to a running handler, as torchrun makes one (PyTorch 1.13's
// rendezvous/registry.py, c10d_rendezvous_backend.create_backend,
// etcd_rendezvous_backend.create_backend and dynamic_rendezvous.create_handler): a registry of
// backend names, each name's creator making the store the rendezvous lives on and dagsim's
// handler over it.
//
// The backends registered by default:
//  - "c10d" (also "dagsim"): a TCPStore at the endpoint (port 29400 by default). This process
//    hosts it when is_host says so, or, unset, when the endpoint's host names this machine; if
//    hosting fails because another process here already does, it joins as a client, as
//    PyTorch's does. store_type tcp (the default), or file: a FileStore (net/file_store.h, dagsim's
//    own file format) at the endpoint's path, or at a new temporary file when it is empty
//    ("The file creation for C10d store has failed." when none can be made).
//  - "etcd-v2" and "etcd": dagsim's etcd store (the v3 API) at the endpoint (port 2379 by
//    default), protocol http. "etcd" names 1.13's older etcd rendezvous, a different algorithm;
//    here it gives the same dynamic rendezvous as "etcd-v2", whose get_backend() says "etcd".
//  - "static", torchrun's default: the c10d store at the endpoint, served by node rank 0, ranks in
//    node-rank order (static_rendezvous.h).
// Options read by every backend: read_timeout (whole seconds, 60 by default; each store call's
// timeout) and the handler's (rendezvous_parameters.h).
//
// Promises, with PyTorch's words where it has them:
//  - a bad option is invalid_argument (PyTorch's ValueError): "Invalid store type given...",
//    "The read timeout must be a positive integer.", "The protocol must be HTTP or HTTPS.";
//  - a store that cannot be reached within read_timeout, or an endpoint that does not resolve,
//    is rendezvous_connection_failed at creation (not at the first rendezvous): "The connection
//    to the C10d store has failed." / "The connection to etcd has failed.", with the cause;
//  - an unknown name, or a creator whose handler names another backend, is invalid_argument.
//
// Threading: create_handler() runs on one of `host`'s fibers (it calls the store); what it
// returns lives on that thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/rendezvous/rendezvous_handler.h"
#include "core/rendezvous/rendezvous_parameters.h"
#include "net/tcpstore/store_host.h"
#include "net/tcpstore/tcp_store_server.h"

namespace dagsim::net {

inline constexpr uint16_t kC10dDefaultPort = 29400;  // PyTorch's DEFAULT_PORT
inline constexpr uint16_t kEtcdDefaultPort = 2379;
// The key under which an agent that hosts a c10d store names itself (its node descriptor), set
// before the store answers anyone, so its clients can name it once it is gone (store_host()).
inline constexpr const char* kStoreHostKey = "dagsim/store_host";

// What a creator is told beyond the parameters.
struct RendezvousContext {
  tcpstore::StoreHost* host = nullptr;  // the thread's I/O loop, clock and fibers; not null
  rendezvous::NodeDesc node;            // this process in the rendezvous
  // Lines an operator should see (the store this process serves, a fallback to a client).
  std::function<void(const std::string&)> log;
};

// A rendezvous ready to join: the store it lives on (which the agent and its workers share), the
// server when this process hosts it, and the handler. Destroy on the host's thread.
class Rendezvous {
 public:
  Rendezvous(std::unique_ptr<tcpstore::TcpStoreServer> server, std::unique_ptr<store::Store> store,
             rendezvous::RendezvousEndpoint endpoint, runtime::Duration read_timeout);
  ~Rendezvous();

  rendezvous::RendezvousHandler& handler() { return *handler_; }
  store::Store& store() { return *store_; }
  // The server this process hosts (c10d), or null.
  tcpstore::TcpStoreServer* server() { return server_.get(); }
  // Where the store is, as the parameters named it (a hosted store's real port when it was 0).
  const rendezvous::RendezvousEndpoint& endpoint() const { return endpoint_; }
  runtime::Duration read_timeout() const { return read_timeout_; }
  // The agent that hosts the c10d store this process is a client of, as it named itself
  // (kStoreHostKey; store text, not yet escaped, at most 256 bytes), or "" when unknown: an
  // external store, a file or etcd, or this process hosts it.
  const std::string& store_host() const { return store_host_; }
  // True when this process's c10d store served it and then refused a connection: the process that
  // served it ended, and the store's keys with it (TcpStoreClient::gone()). Never for etcd or a
  // file store, which outlive any agent.
  bool store_gone() const;
  void set_store_host(std::string host) { store_host_ = std::move(host); }
  const std::string& get_backend() const { return handler_->get_backend(); }
  const std::string& get_run_id() const { return handler_->get_run_id(); }

  // For creators: the handler over store(), made last.
  void set_handler(std::unique_ptr<rendezvous::RendezvousHandler> handler) { handler_ = std::move(handler); }

 private:
  std::unique_ptr<tcpstore::TcpStoreServer> server_;
  std::unique_ptr<store::Store> store_;
  rendezvous::RendezvousEndpoint endpoint_;
  runtime::Duration read_timeout_;
  std::string store_host_;
  std::unique_ptr<rendezvous::RendezvousHandler> handler_;
};

using RendezvousHandlerCreator = std::unique_ptr<Rendezvous> (*)(const rendezvous::RendezvousParameters& params,
                                                                  const RendezvousContext& context);

class RendezvousHandlerRegistry {
 public:
  // Registering the same creator twice is allowed; another creator under a taken name is not.
  void register_backend(const std::string& backend, RendezvousHandlerCreator creator);
  std::unique_ptr<Rendezvous> create_handler(const rendezvous::RendezvousParameters& params,
                                             const RendezvousContext& context) const;
  bool has(const std::string& backend) const { return registry_.count(backend) != 0; }

 private:
  std::map<std::string, RendezvousHandlerCreator> registry_;
};

// What one of the default backends will make of `params`, checked without I/O: the store's
// endpoint (with the backend's default port), its read timeout, and is_host when it was given.
// Throws invalid_argument as creating would, and for names no default backend has.
struct RendezvousTarget {
  rendezvous::RendezvousEndpoint endpoint;  // store_type file: the path in `host` ("": a temporary file)
  runtime::Duration read_timeout{};
  std::optional<bool> is_host;
  bool file_store = false;  // c10d's store_type file
};
RendezvousTarget check_rendezvous_parameters(const rendezvous::RendezvousParameters& params);

// A registry holding c10d, dagsim, etcd-v2, etcd and static, as torchrun's does.
RendezvousHandlerRegistry default_rendezvous_registry();

// The default creators, for a registry of one's own.
std::unique_ptr<Rendezvous> create_c10d_handler(const rendezvous::RendezvousParameters& params,
                                                const RendezvousContext& context);
std::unique_ptr<Rendezvous> create_etcd_handler(const rendezvous::RendezvousParameters& params,
                                                const RendezvousContext& context);

}  // namespace dagsim::net
