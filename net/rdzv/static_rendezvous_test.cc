// The static backend (static_rendezvous.h): torchrun 1.13's rules (static_tcp_rendezvous.py's
// create_rdzv_handler) and the rank order, on real stores.
#include "net/rdzv/static_rendezvous.h"

#include <boost/asio/ip/tcp.hpp>
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"

namespace dagsim::net {
namespace {

using rendezvous::RendezvousParameters;

uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(io, boost::asio::ip::tcp::endpoint(boost::asio::ip::tcp::v4(), 0));
  return probe.local_endpoint().port();
}

RendezvousParameters static_params(uint16_t port, int rank, int nodes = 2, std::map<std::string, std::string> conf = {}) {
  conf["rank"] = std::to_string(rank);
  return RendezvousParameters("static", "127.0.0.1:" + std::to_string(port), "job", nodes, nodes, std::move(conf));
}

TEST(StaticRendezvous, RefusesAsTorchrunDoesNamingTheFlag) {
  EXPECT_TRUE(throws_error([] { check_static_parameters(RendezvousParameters("static", "h:1", "r", 1, 1)); },
                           ErrorCode::invalid_argument, {"rank is absent", "--node_rank"}));
  EXPECT_TRUE(throws_error([] { check_static_parameters(RendezvousParameters("static", " ", "r", 1, 1, {{"rank", "0"}})); },
                           ErrorCode::invalid_argument, {"endpoint is absent", "--master_addr"}));
  EXPECT_TRUE(throws_error([] { check_static_parameters(RendezvousParameters("static", "h", "r", 1, 1, {{"rank", "0"}})); },
                           ErrorCode::invalid_argument, {"Port is absent in endpoint: h. Try launching with --master_port"}));
  EXPECT_TRUE(throws_error([] { check_static_parameters(RendezvousParameters("static", "h:1", "r", 1, 2, {{"rank", "0"}})); },
                           ErrorCode::invalid_argument, {"fixed number of nodes", "--rdzv_backend c10d"}));
  EXPECT_TRUE(throws_error([] { check_static_parameters(static_params(1, 2)); }, ErrorCode::invalid_argument,
                           {"the node rank 2 must be from 0 to 1"}));
  EXPECT_TRUE(throws_error(
      [] { check_static_parameters(static_params(1, 0, 2, {{"store_type", "file"}})); }, ErrorCode::invalid_argument,
      {"TCPStore"}));
}

TEST(StaticRendezvous, NodeRankZeroHostsAndTheTimeoutIsTheJoinTimeout) {
  const StaticTarget zero = check_static_parameters(static_params(5000, 0));
  EXPECT_EQ(zero.rank, 0u);
  EXPECT_EQ(zero.store.is_host, true);
  EXPECT_EQ(zero.store.endpoint, (rendezvous::RendezvousEndpoint{"127.0.0.1", 5000}));
  const StaticTarget one = check_static_parameters(static_params(5000, 1, 2, {{"is_host", "true"}}));
  EXPECT_EQ(one.store.is_host, false);  // the node rank decides, not the conf
}

TEST(StaticRendezvous, NodesAreOrderedByNodeRankWhateverTheirAddresses) {
  EXPECT_LT(static_node({"zzz", 9, 0}, 1), static_node({"aaa", 1, 0}, 2));
  EXPECT_LT(static_node({"zzz", 9, 0}, 9), static_node({"aaa", 1, 0}, 10));
  EXPECT_EQ(static_node({"host", 1, 0}, 3).addr, "00003.host");
}

// Two agents on one host: node rank 0 (whose address sorts last) serves the store and gets rank 0.
TEST(StaticRendezvous, TwoAgentsGetTheirNodeRanksAndRankZeroServes) {
  const uint16_t port = free_port();
  tcpstore::StoreHost host("static-test");
  host.run([&] {
    const RendezvousContext zero_context{&host, {"zzz", 1, 0}, nullptr};
    const RendezvousContext one_context{&host, {"aaa", 2, 0}, nullptr};
    std::unique_ptr<Rendezvous> zero = default_rendezvous_registry().create_handler(
        static_params(port, 0, 2, {{"timeout", "20"}}), zero_context);
    std::unique_ptr<Rendezvous> one = default_rendezvous_registry().create_handler(static_params(port, 1), one_context);
    EXPECT_NE(zero->server(), nullptr);
    EXPECT_EQ(one->server(), nullptr);
    EXPECT_EQ(zero->get_backend(), "static");
    EXPECT_EQ(zero->handler().settings().timeout.join, std::chrono::seconds(20));
    std::optional<rendezvous::RendezvousInfo> one_info;
    host.spawner().spawn("node rank 1", [&] { one_info = one->handler().next_rendezvous(); });
    const rendezvous::RendezvousInfo zero_info = zero->handler().next_rendezvous();
    while (!one_info) host.clock().sleep(std::chrono::milliseconds(10));
    EXPECT_EQ(zero_info.rank, 0u);
    EXPECT_EQ(one_info->rank, 1u);
    EXPECT_EQ(zero_info.world_size, 2u);
    EXPECT_EQ(one_info->world_size, 2u);
    one.reset();
    zero.reset();
  });
}

}  // namespace
}  // namespace dagsim::net
