// PyTorch 1.13's UtilsTest.test_matches_machine_hostname_* and NodeDescGeneratorTest.test_generate,
// ported by name, on this machine's real resolver.
#include "net/rdzv/host_names.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <gtest/gtest.h>

#include <vector>

namespace dagsim::net {
namespace {

std::string own_name() {
  char name[256] = {};
  EXPECT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  return name;
}

// test_matches_machine_hostname_returns_true_if_hostname_is_loopback
TEST(UtilsTest, MatchesMachineHostnameReturnsTrueIfHostnameIsLoopback) {
  for (const char* host : {"localhost", "127.0.0.1", "127.0.1.1", "127.255.0.9", "::1", "0:0:0:0:0:0:0:1", "::0001"}) {
    EXPECT_TRUE(matches_machine_hostname(host)) << host;
  }
}

// test_matches_machine_hostname_returns_true_if_hostname_is_machine_hostname
TEST(UtilsTest, MatchesMachineHostnameReturnsTrueIfHostnameIsMachineHostname) {
  EXPECT_TRUE(matches_machine_hostname(own_name()));
}

// test_matches_machine_hostname_returns_true_if_hostname_is_machine_fqdn
TEST(UtilsTest, MatchesMachineHostnameReturnsTrueIfHostnameIsMachineFqdn) {
  EXPECT_TRUE(matches_machine_hostname(machine_fqdn())) << machine_fqdn();
}

// test_matches_machine_hostname_returns_true_if_hostname_is_machine_address: every address this
// host's name resolves to.
TEST(UtilsTest, MatchesMachineHostnameReturnsTrueIfHostnameIsMachineAddress) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_protocol = IPPROTO_TCP;
  addrinfo* found = nullptr;
  if (::getaddrinfo(own_name().c_str(), nullptr, &hints, &found) != 0) GTEST_SKIP() << "this host's name does not resolve";
  int checked = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* addr = a->ai_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
                                                : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    ASSERT_NE(::inet_ntop(a->ai_family, addr, text, sizeof(text)), nullptr);
    EXPECT_TRUE(matches_machine_hostname(text)) << text;
    ++checked;
  }
  ::freeaddrinfo(found);
  EXPECT_GT(checked, 0);
}

// test_matches_machine_hostname_returns_false_if_hostname_does_not_match
TEST(UtilsTest, MatchesMachineHostnameReturnsFalseIfHostnameDoesNotMatch) {
  for (const char* host : {"dummy", "0.0.0.0", "::2", "192.0.2.1", "2001:db8::1", "", "example.invalid"}) {
    EXPECT_FALSE(matches_machine_hostname(host)) << host;
  }
}

TEST(UtilsTest, ResolveErrorNamesAHostThatDoesNotResolve) {
  EXPECT_EQ(resolve_error("localhost"), "");
  EXPECT_EQ(resolve_error("127.0.0.1"), "");
  const std::string why = resolve_error("dummy_endpoint.invalid");
  EXPECT_NE(why.find("cannot resolve host 'dummy_endpoint.invalid'"), std::string::npos) << why;
}

// NodeDescGeneratorTest.test_generate: {fqdn}_{pid}_{0..3}, local_id counting up from 0.
TEST(NodeDescGeneratorTest, Generate) {
  NodeDescGenerator generator;
  for (uint64_t local_id = 0; local_id < 4; ++local_id) {
    const rendezvous::NodeDesc node = generator.generate();
    EXPECT_EQ(node.addr, machine_fqdn());
    EXPECT_EQ(node.pid, static_cast<uint64_t>(::getpid()));
    EXPECT_EQ(node.local_id, local_id);
    EXPECT_EQ(rendezvous::to_string(node), machine_fqdn() + "_" + std::to_string(::getpid()) + "_" + std::to_string(local_id));
  }
}

TEST(NodeDescGeneratorTest, GivenAddressIsTheNodesName) {
  NodeDescGenerator generator("10.248.0.1");
  EXPECT_EQ(rendezvous::to_string(generator.generate()), "10.248.0.1_" + std::to_string(::getpid()) + "_0");
  EXPECT_EQ(generator.generate().local_id, 1u);
}

// choose_node_address, on facts given: the name whenever it is of use to other hosts or the job is
// on this host, the routed address (and a warning naming both) otherwise.
const rendezvous::RendezvousEndpoint kRemote{"10.248.0.254", 29400};

TEST(NodeAddressTest, NameWithAnAddressOtherHostsReachIsKept) {
  const NodeAddress got = choose_node_address({"node1.example", {"127.0.1.1", "10.1.2.3"}, "10.248.0.1", ""}, kRemote);
  EXPECT_EQ(got.host, "node1.example");
  EXPECT_EQ(got.warning, "");
}

TEST(NodeAddressTest, LoopbackNameGivesTheRoutedAddressWithAWarning) {
  const NodeAddress got = choose_node_address({"vm", {"127.0.0.1"}, "10.248.0.1", ""}, kRemote);
  EXPECT_EQ(got.host, "10.248.0.1");
  EXPECT_EQ(got.warning,
            "this host's name 'vm' resolves only to loopback (127.0.0.1), so other hosts cannot reach this node by it: "
            "using 10.248.0.1 instead, the address of the interface that routes to the rendezvous endpoint 10.248.0.254:29400");
  // IPv6 loopback is loopback too, and an IPv6 endpoint is written with brackets.
  const NodeAddress v6 = choose_node_address({"vm", {"::1", "127.0.1.1"}, "fd00::2", ""}, rendezvous::RendezvousEndpoint{"fd00::1", 7});
  EXPECT_EQ(v6.host, "fd00::2");
  EXPECT_NE(v6.warning.find("(::1, 127.0.1.1)"), std::string::npos) << v6.warning;
  EXPECT_NE(v6.warning.find("endpoint [fd00::1]:7"), std::string::npos) << v6.warning;
}

TEST(NodeAddressTest, NameThatDoesNotResolveGivesTheRoutedAddress) {
  const NodeAddress got = choose_node_address({"nameless", {}, "10.248.0.2", ""}, kRemote);
  EXPECT_EQ(got.host, "10.248.0.2");
  EXPECT_NE(got.warning.find("this host's name 'nameless' does not resolve"), std::string::npos) << got.warning;
}

TEST(NodeAddressTest, LoopbackEndpointOrFileStoreKeepsTheNameSilently) {
  for (const char* routed : {"127.0.0.1", "::1"}) {
    const NodeAddress got = choose_node_address({"vm", {"127.0.0.1"}, routed, ""}, rendezvous::RendezvousEndpoint{"localhost", 29400});
    EXPECT_EQ(got.host, "vm");
    EXPECT_EQ(got.warning, "");
  }
  const NodeAddress file = choose_node_address({"vm", {"127.0.0.1"}, "", ""}, std::nullopt);
  EXPECT_EQ(file.host, "vm");
  EXPECT_EQ(file.warning, "");
}

TEST(NodeAddressTest, NoRouteKeepsTheNameAndSaysWhy) {
  const NodeAddress got = choose_node_address({"vm", {"127.0.0.1"}, "", "no route to 10.248.0.254: Network is unreachable"}, kRemote);
  EXPECT_EQ(got.host, "vm");
  EXPECT_NE(got.warning.find("no interface routes to the rendezvous endpoint 10.248.0.254:29400 "
                             "(no route to 10.248.0.254: Network is unreachable): keeping the name"),
            std::string::npos)
      << got.warning;
}

bool resolves_only_to_loopback(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return true;
  bool only = true;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      only = only && (ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      only = only && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    }
  }
  ::freeaddrinfo(found);
  return only;
}

// node_address on this host's own resolver and routes.
TEST(NodeAddressTest, OnThisHostALoopbackEndpointKeepsTheName) {
  for (const char* host : {"127.0.0.1", "localhost"}) {
    const NodeAddress got = node_address(rendezvous::RendezvousEndpoint{host, 29400});
    EXPECT_EQ(got.host, machine_fqdn()) << host;
    EXPECT_EQ(got.warning, "") << host;
  }
  EXPECT_EQ(node_address(std::nullopt).host, machine_fqdn());
}

// An endpoint at one of this host's own IPv4 addresses other than loopback routes from that
// address: where the name resolves only to loopback, that address is the node's, with a warning.
TEST(NodeAddressTest, OnThisHostAnEndpointOnAnotherInterfaceGivesItsAddress) {
  ifaddrs* all = nullptr;
  ASSERT_EQ(::getifaddrs(&all), 0);
  std::string own;
  for (const ifaddrs* i = all; i != nullptr && own.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr addr = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    if ((ntohl(addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &addr, text, sizeof(text));
    own = text;
  }
  ::freeifaddrs(all);
  if (own.empty()) GTEST_SKIP() << "this host has no IPv4 address but loopback";
  const NodeAddress got = node_address(rendezvous::RendezvousEndpoint{own, 29400});
  if (!resolves_only_to_loopback(machine_fqdn())) {
    EXPECT_EQ(got.host, machine_fqdn());
    EXPECT_EQ(got.warning, "");
    return;
  }
  EXPECT_EQ(got.host, own);
  EXPECT_NE(got.warning.find("using " + own + " instead"), std::string::npos) << got.warning;
}

}  // namespace
}  // namespace dagsim::net
