// PyTorch 1.13's UtilsTest.test_matches_machine_hostname_* and NodeDescGeneratorTest.test_generate,
// ported by name, on this machine's real resolver.
#include "net/rdzv/host_names.h"

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

}  // namespace
}  // namespace dagsim::net
