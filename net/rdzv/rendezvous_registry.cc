// The rendezvous registry and its default backends (rendezvous_registry.h).
#include "net/rdzv/rendezvous_registry.h"

#include "core/base/assert.h"
#include "core/base/probe.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <boost/asio/ip/tcp.hpp>

#include "core/base/error.h"
#include "core/runtime/cancel_scope.h"
#include "core/store/key_value_table.h"
#include "net/etcd/etcd_store.h"
#include "net/file_store.h"
#include "net/rdzv/host_names.h"
#include "net/rdzv/static_rendezvous.h"
#include "net/tcpstore/tcp_store_client.h"

namespace dagsim::net {

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using rendezvous::RendezvousParameters;

std::string lower_trimmed(std::string text) {
  const size_t begin = text.find_first_not_of(" \t\n\r\f\v");
  const size_t end = text.find_last_not_of(" \t\n\r\f\v");
  text = begin == std::string::npos ? std::string() : text.substr(begin, end - begin + 1);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

runtime::Duration read_timeout(const RendezvousParameters& params) {
  const int64_t seconds = params.get_as_int("read_timeout", 60);
  if (seconds <= 0) throw errors::invalid_argument("The read timeout must be a positive integer.");
  if (seconds > 365 * 24 * 3600) throw errors::invalid_argument("The read timeout must be at most a year.");
  return std::chrono::seconds(seconds);
}

Error connection_failed(const char* store, const std::string& cause) {
  return errors::rendezvous_connection_failed(std::string("The connection to ") + store +
                                              " has failed. See inner exception for details. (" + cause + ")");
}

// The store answers within its timeout, or creation fails as PyTorch's constructors do (its
// TCPStore and etcd clients connect when made; ours would otherwise wait for the first call).
void probe(store::Store& store, const std::string& run_id, const char* name) {
  try {
    store.check({rendezvous::state_key(run_id)});
  } catch (const Error& e) {
    runtime::rethrow_if_unwinding(e);
    DAGSIM_PROBE("rendezvous.store_unreachable_at_create");
    throw connection_failed(name, e.what());
  }
}

// Whether something accepts connections on 127.0.0.1:`port` now. A loopback connect is answered at
// once, accepted or refused, so this never waits on the network.
bool loopback_listener(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool accepted = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return accepted;
}

std::unique_ptr<tcpstore::TcpStoreServer> serve(const RendezvousContext& context, uint16_t port) {
  tcp::acceptor acceptor(context.host->io());
  const tcp::endpoint endpoint(tcp::v4(), port);
  // Two agents on one host that both try to host c10d's fixed port can both lose: with
  // SO_REUSEADDR both binds succeed, and Linux marks a socket listening before it checks the port
  // for another listener (inet_csk_listen_start), so two listens on two cores can each see the
  // other and both fail with EADDRINUSE, leaving no store at all (slurm_srun_launch, issue 50's
  // note). When the port is refused and nothing answers on it, that race is the likely cause:
  // try again after a pause that differs per process, so one of them wins and the other finds it.
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    boost::system::error_code failed;
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint, failed);
    if (!failed) acceptor.listen(asio::socket_base::max_listen_connections, failed);
    if (!failed) break;
    acceptor.close();
    if (failed != asio::error::address_in_use || attempt == kAttempts || port == 0 || loopback_listener(port)) {
      throw boost::system::system_error(failed);
    }
    const auto pause = std::chrono::milliseconds(10 + (::getpid() * 7919 + attempt * 104729) % 90);
    context.host->clock().sleep(pause);
  }
  tcpstore::TcpStoreServerOptions options;
  if (context.log) options.log = [log = context.log](const std::string& line) { log("store: " + line); };
  return std::make_unique<tcpstore::TcpStoreServer>(context.host->io(), context.host->spawner(), std::move(acceptor),
                                                    std::make_shared<store::KeyValueTable>(), options);
}

std::unique_ptr<Rendezvous> finish(std::unique_ptr<Rendezvous> made, const RendezvousParameters& params,
                                   const RendezvousContext& context, const char* store_name) {
  DAGSIM_ASSERT(made != nullptr);
  DAGSIM_ASSERT(context.host != nullptr);
  probe(made->store(), params.run_id(), store_name);
  rendezvous::RendezvousHandlerOptions options;
  options.backend_name = params.backend();
  made->set_handler(std::make_unique<rendezvous::RendezvousHandler>(
      context.host->env(), made->store(), rendezvous::settings_from_parameters(params), context.node, options));
  // The handler holds the store: both stand before anyone uses the rendezvous.
  DAGSIM_ASSERT(made->get_backend() == params.backend());
  return made;
}

RendezvousTarget c10d_target(const RendezvousParameters& params) {
  const std::string store_type = lower_trimmed(params.get("store_type", "tcp"));
  if (store_type == "file") {
    // The endpoint is the file's path ("": a temporary file); read_timeout is the TCPStore's and
    // does not apply, as in PyTorch: a file store waits up to its own default.
    RendezvousTarget target;
    target.file_store = true;
    target.endpoint = {params.endpoint(), 0};
    target.read_timeout = FileStore::kDefaultTimeout;
    return target;
  }
  if (store_type != "tcp") throw errors::invalid_argument("Invalid store type given. Currently only supports file and tcp.");
  RendezvousTarget target;
  target.endpoint = rendezvous::parse_rendezvous_endpoint(params.endpoint(), kC10dDefaultPort);
  target.is_host = params.get_as_bool("is_host");
  target.read_timeout = read_timeout(params);
  return target;
}

RendezvousTarget etcd_target(const RendezvousParameters& params) {
  RendezvousTarget target;
  target.endpoint = rendezvous::parse_rendezvous_endpoint(params.endpoint(), kEtcdDefaultPort);
  target.read_timeout = read_timeout(params);
  const std::string protocol = lower_trimmed(params.get("protocol", "http"));
  if (protocol != "http" && protocol != "https") throw errors::invalid_argument("The protocol must be HTTP or HTTPS.");
  if (protocol == "https") throw errors::invalid_argument("protocol https: dagsim's etcd client speaks HTTP only.");
  return target;
}

}  // namespace

Rendezvous::Rendezvous(std::unique_ptr<tcpstore::TcpStoreServer> server, std::unique_ptr<store::Store> store,
                       rendezvous::RendezvousEndpoint endpoint, runtime::Duration read_timeout)
    : server_(std::move(server)), store_(std::move(store)), endpoint_(std::move(endpoint)), read_timeout_(read_timeout) {
  DAGSIM_ASSERT(store_ != nullptr);
  // read_timeout() refused anything else at the boundary (params), and a file store has its own.
  DAGSIM_ASSERT(read_timeout_ > runtime::Duration::zero());
  store_->set_timeout(read_timeout_);
}

bool Rendezvous::store_gone() const {
  const auto* client = dynamic_cast<const tcpstore::TcpStoreClient*>(store_.get());
  return client != nullptr && client->gone();
}

// The handler goes first (it holds the store), then the client, then the server.
Rendezvous::~Rendezvous() {
  handler_.reset();
  store_.reset();
  if (server_) server_->close();
}

void RendezvousHandlerRegistry::register_backend(const std::string& backend, RendezvousHandlerCreator creator) {
  if (backend.empty()) throw errors::invalid_argument("The rendezvous backend name must be a non-empty string.");
  const auto it = registry_.find(backend);
  if (it != registry_.end() && it->second != creator) {
    throw errors::invalid_argument("The rendezvous backend '" + backend +
                                   "' cannot be registered with another creator as it is already registered.");
  }
  registry_[backend] = creator;
}

std::unique_ptr<Rendezvous> RendezvousHandlerRegistry::create_handler(const RendezvousParameters& params,
                                                                      const RendezvousContext& context) const {
  const auto it = registry_.find(params.backend());
  if (it == registry_.end()) {
    std::string known;
    for (const auto& [name, creator] : registry_) known += (known.empty() ? "" : ", ") + name;
    throw errors::invalid_argument("The rendezvous backend '" + params.backend() +
                                   "' is not registered. Did you forget to call `register`? (registered: " + known + ")");
  }
  std::unique_ptr<Rendezvous> made = it->second(params, context);
  if (made->get_backend() != params.backend()) {
    throw errors::invalid_argument("The rendezvous backend '" + made->get_backend() +
                                   "' does not match the requested backend '" + params.backend() + "'.");
  }
  return made;
}

namespace {

// store_type file: a FileStore at the endpoint's path, or at a new temporary file (mkstemp, in
// $TMPDIR or /tmp, readable only by this user) when the endpoint is empty.
std::unique_ptr<Rendezvous> create_c10d_file_handler(const RendezvousParameters& params, const RendezvousContext& context,
                                                     const RendezvousTarget& target) {
  std::string path = target.endpoint.host;
  if (path.empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string name = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/tmpXXXXXX";
    const int fd = ::mkstemp(name.data());
    if (fd < 0) {
      throw errors::rendezvous_connection_failed("The file creation for C10d store has failed. See inner exception for details. (" +
                                                 name + ": " + std::strerror(errno) + ")");
    }
    ::close(fd);
    path = name;
  }
  std::unique_ptr<FileStore> store;
  try {
    store = std::make_unique<FileStore>(path, context.host->clock());
  } catch (const Error& e) {
    if (e.code() != ErrorCode::connection_failed) throw;
    throw connection_failed("the C10d store", e.detail());
  }
  return finish(std::make_unique<Rendezvous>(nullptr, std::move(store), rendezvous::RendezvousEndpoint{path, 0}, target.read_timeout),
                params, context, "the C10d store");
}

}  // namespace

std::unique_ptr<Rendezvous> create_c10d_handler(const RendezvousParameters& params, const RendezvousContext& context) {
  const RendezvousTarget target = c10d_target(params);
  if (target.file_store) return create_c10d_file_handler(params, context, target);
  const rendezvous::RendezvousEndpoint& endpoint = target.endpoint;
  const std::optional<bool>& configured = target.is_host;
  if (const std::string why = resolve_error(endpoint.host); !why.empty()) throw connection_failed("the C10d store", why);
  const bool is_host = configured.value_or(matches_machine_hostname(endpoint.host));
  std::unique_ptr<tcpstore::TcpStoreServer> server;
  if (is_host) {
    try {
      server = serve(context, endpoint.port);
      // Launchers and their scripts wait for these words (conformance/interop/launch_ddp.py).
      if (context.log) context.log("serving the rendezvous store on port " + std::to_string(server->port()));
      // Before any client is answered (no fiber has run since the server was made), so a client's
      // probe below finds it.
      const std::string self = rendezvous::to_string(context.node);
      server->table().set("/" + std::string(kStoreHostKey), store::Bytes(self.begin(), self.end()));
    } catch (const boost::system::system_error& e) {
      // Another process here hosts it (PyTorch's "edge case"): be its client, unless told to host.
      DAGSIM_ASSERT(server == nullptr);
      if (!configured) DAGSIM_PROBE("rendezvous.c10d_port_taken_joined_as_client");
      if (configured) throw connection_failed("the C10d store", "cannot serve on port " + std::to_string(endpoint.port) + ": " + e.code().message());
      if (context.log) context.log("cannot serve the store on port " + std::to_string(endpoint.port) + " (" + e.code().message() + "); joining it as a client");
    }
  }
  tcpstore::TcpStoreClientOptions client;
  client.host = server ? "127.0.0.1" : endpoint.host;
  client.port = server ? server->port() : endpoint.port;
  rendezvous::RendezvousEndpoint where = endpoint;
  if (server) where.port = server->port();
  auto store = std::make_unique<tcpstore::TcpStoreClient>(context.host->io(), client);
  const bool hosted = server != nullptr;
  // A host's clients reach its own server, on the port it got.
  if (hosted) DAGSIM_ASSERT(where.port == server->port() && where.port != 0);
  std::unique_ptr<Rendezvous> made = finish(std::make_unique<Rendezvous>(std::move(server), std::move(store), where, target.read_timeout),
                                            params, context, "the C10d store");
  if (!hosted) {
    // Who hosts the store, read now (without waiting: an external store has no such key), since
    // once that host is gone nothing can be read. The probe above saw the store answer, and a
    // host names itself before it answers anyone.
    try {
      const store::Versioned named = made->store().get_versioned(kStoreHostKey);
      if (named.version != 0 && named.value.size() <= 256) made->set_store_host(std::string(named.value.begin(), named.value.end()));
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      throw connection_failed("the C10d store", e.what());
    }
  }
  return made;
}

std::unique_ptr<Rendezvous> create_etcd_handler(const RendezvousParameters& params, const RendezvousContext& context) {
  const RendezvousTarget target = etcd_target(params);
  const rendezvous::RendezvousEndpoint& endpoint = target.endpoint;
  if (const std::string why = resolve_error(endpoint.host); !why.empty()) throw connection_failed("etcd", why);
  // Keys under a prefix of dagsim's own: PyTorch's etcd-v2 speaks etcd's v2 API, whose keys the
  // v3 API does not see, so the two cannot share a rendezvous anyway.
  auto store = std::make_unique<etcd::EtcdStore>(context.host->io(), context.host->clock(),
                                                 etcd::EtcdStoreOptions{{endpoint.host, endpoint.port}, "/torch/elastic/dagsim/"});
  return finish(std::make_unique<Rendezvous>(nullptr, std::move(store), endpoint, target.read_timeout), params, context,
                "etcd");
}

RendezvousTarget check_rendezvous_parameters(const RendezvousParameters& params) {
  const std::string& backend = params.backend();
  if (backend == "c10d" || backend == "dagsim") return c10d_target(params);
  if (backend == "etcd" || backend == "etcd-v2") return etcd_target(params);
  if (backend == "static") return check_static_parameters(params).store;
  throw errors::invalid_argument("The rendezvous backend '" + backend +
                                 "' is not registered (dagsim has c10d, dagsim, etcd and etcd-v2).");
}

RendezvousHandlerRegistry default_rendezvous_registry() {
  RendezvousHandlerRegistry registry;
  registry.register_backend("c10d", create_c10d_handler);
  registry.register_backend("dagsim", create_c10d_handler);
  registry.register_backend("etcd-v2", create_etcd_handler);
  registry.register_backend("etcd", create_etcd_handler);
  registry.register_backend("static", create_static_handler);
  return registry;
}

}  // namespace dagsim::net
