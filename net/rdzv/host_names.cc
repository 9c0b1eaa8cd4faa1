// This machine's names, as torchrun reads them (host_names.h).
#include "net/rdzv/host_names.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

}  // namespace

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
  return {machine_fqdn(), static_cast<uint64_t>(::getpid()), local_id_.fetch_add(1)};
}

}  // namespace dagsim::net
