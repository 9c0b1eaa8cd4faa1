// This machine's names, as torchrun reads them (host_names.h).
#include "net/rdzv/host_names.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

namespace dagsim::net {

namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return std::string();
  return name;
}

// An IP address in its canonical spelling (Python's str(ipaddress.ip_address(...))), with its
// family; nullopt when `text` is not one.
struct Address {
  int family = 0;
  std::string text;
  bool loopback = false;
};

std::optional<Address> parse_address(const std::string& text) {
  char out[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    ::inet_ntop(AF_INET, &v4, out, sizeof(out));
    return Address{AF_INET, out, (ntohl(v4.s_addr) >> 24) == 127};
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    ::inet_ntop(AF_INET6, &v6, out, sizeof(out));
    return Address{AF_INET6, out, IN6_IS_ADDR_LOOPBACK(&v6) != 0};
  }
  return std::nullopt;
}

std::string address_text(const sockaddr* addr) {
  char out[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, out, sizeof(out));
  } else if (addr->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, out, sizeof(out));
  }
  return out;
}

// Every address `host` resolves to, in the resolver's order, each once.
std::vector<std::string> resolve_all(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::vector<std::string> addresses;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const std::string text = address_text(a->ai_addr);
    if (!text.empty() && std::find(addresses.begin(), addresses.end(), text) == addresses.end()) addresses.push_back(text);
  }
  ::freeaddrinfo(found);
  return addresses;
}

// The local address the kernel would send from to reach `endpoint`: a UDP socket's connect()
// only picks a route and a source address, it sends nothing. Empty, with *error set, when the
// endpoint does not resolve or no route reaches it.
std::string routed_address(const rendezvous::RendezvousEndpoint& endpoint, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  // The route does not depend on the port; port 0 (a server's "any") is not one to connect to.
  const std::string port = std::to_string(endpoint.port == 0 ? 9 : endpoint.port);
  if (const int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    *error = std::string("cannot resolve '") + endpoint.host + "': " + ::gai_strerror(rc);
    return std::string();
  }
  std::string routed;
  for (const addrinfo* a = found; a != nullptr && routed.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      *error = "no route to " + address_text(a->ai_addr) + ": " + std::strerror(errno);
    } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) {
      *error = std::string("getsockname: ") + std::strerror(errno);
    } else {
      routed = address_text(reinterpret_cast<const sockaddr*>(&local));
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (!routed.empty()) error->clear();
  return routed;
}

bool is_loopback(const std::string& address) {
  const std::optional<Address> parsed = parse_address(address);
  return parsed && parsed->loopback;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string endpoint_text(const rendezvous::RendezvousEndpoint& endpoint) {
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  return (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

// True when some address of the name is not loopback: other hosts may reach it by that name.
bool name_is_usable(const NodeAddressFacts& facts) {
  return std::any_of(facts.addresses.begin(), facts.addresses.end(), [](const std::string& a) { return !is_loopback(a); });
}

}  // namespace

NodeAddress choose_node_address(const NodeAddressFacts& facts, const std::optional<rendezvous::RendezvousEndpoint>& endpoint) {
  NodeAddress chosen{facts.fqdn, ""};
  if (!endpoint || name_is_usable(facts)) return chosen;
  // A loopback route: the endpoint is on this host, and so, for this node, is the job.
  if (!facts.routed.empty() && is_loopback(facts.routed)) return chosen;
  const std::string why = "this host's name '" + facts.fqdn + "' " +
                          (facts.addresses.empty() ? std::string("does not resolve")
                                                   : "resolves only to loopback (" + joined(facts.addresses) + ")") +
                          ", so other hosts cannot reach this node by it";
  if (facts.routed.empty()) {
    chosen.warning = why + ", and no interface routes to the rendezvous endpoint " + endpoint_text(*endpoint) + " (" +
                     facts.route_error + "): keeping the name";
    return chosen;
  }
  chosen.host = facts.routed;
  chosen.warning = why + ": using " + facts.routed + " instead, the address of the interface that routes to the rendezvous endpoint " +
                   endpoint_text(*endpoint);
  return chosen;
}

NodeAddress node_address(const std::optional<rendezvous::RendezvousEndpoint>& endpoint) {
  NodeAddressFacts facts;
  facts.fqdn = machine_fqdn();
  facts.addresses = resolve_all(facts.fqdn);
  // The route matters only when the name is no use to other hosts.
  if (endpoint && !name_is_usable(facts)) facts.routed = routed_address(*endpoint, &facts.route_error);
  return choose_node_address(facts, endpoint);
}

std::string machine_fqdn() {
  const std::string name = host_name();
  if (name.empty()) return "localhost";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return name;
  std::string fqdn = name;
  const bool v6 = found->ai_family == AF_INET6;
  const void* addr = v6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr);
  const socklen_t length = v6 ? sizeof(in6_addr) : sizeof(in_addr);
  hostent entry{};
  hostent* result = nullptr;
  std::vector<char> buffer(16 * 1024);
  int error = 0;
  if (::gethostbyaddr_r(addr, length, found->ai_family, &entry, buffer.data(), buffer.size(), &result, &error) == 0 &&
      result != nullptr && result->h_name != nullptr) {
    fqdn = result->h_name;
    std::vector<std::string> names{fqdn};
    for (char** alias = result->h_aliases; alias != nullptr && *alias != nullptr; ++alias) names.emplace_back(*alias);
    for (const std::string& n : names) {
      if (n.find('.') != std::string::npos) {
        fqdn = n;
        break;
      }
    }
  }
  ::freeaddrinfo(found);
  return fqdn;
}

bool matches_machine_hostname(const std::string& host) {
  if (host == "localhost") return true;
  const std::optional<Address> addr = parse_address(host);
  if (addr && addr->loopback) return true;
  const std::string own = host_name();
  if (own.empty()) return false;
  if (host == own) return true;
  // Beyond PyTorch: getfqdn() is what torchrun itself puts in MASTER_ADDR, so it names us too.
  if (!addr && host == machine_fqdn()) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_CANONNAME;
  addrinfo* found = nullptr;
  if (::getaddrinfo(own.c_str(), nullptr, &hints, &found) != 0) return false;
  bool matches = false;
  for (const addrinfo* a = found; a != nullptr && !matches; a = a->ai_next) {
    if (a->ai_canonname != nullptr && host == a->ai_canonname) matches = true;
    if (addr && a->ai_addr != nullptr && address_text(a->ai_addr) == addr->text) matches = true;
  }
  ::freeaddrinfo(found);
  return matches;
}

std::string resolve_error(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc == 0) return std::string();
  return std::string("cannot resolve host '") + host + "': " + ::gai_strerror(rc);
}

rendezvous::NodeDesc NodeDescGenerator::generate() {
  return {addr_ ? *addr_ : machine_fqdn(), static_cast<uint64_t>(::getpid()), local_id_.fetch_add(1)};
}

}  // namespace dagsim::net
