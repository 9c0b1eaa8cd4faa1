// PyTorch 1.13's tests of the backend registry (rendezvous/api_test.py
// RendezvousHandlerRegistryTest), of create_backend for c10d and etcd
// (c10d_rendezvous_backend_test.py and etcd_rendezvous_backend_test.py CreateBackendTest), of the
// legacy etcd name (etcd_rendezvous_test.py) and of create_handler
// (dynamic_rendezvous_test.py CreateHandlerTest, DynamicRendezvousHandlerFromBackendTest), ported
// by name onto real stores: a TCPStore this process hosts or reaches, and a throwaway etcd.
//
// Each creation is checked the way PyTorch's tests check it and then used: the handler it gives
// forms a one-node round, and the state lands in the store under torch.rendezvous.<run_id>.
#include "net/rdzv/rendezvous_registry.h"

#include <boost/asio/ip/tcp.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

#include "core/base/throws_error_test_util.h"
#include "core/store/key_value_table.h"
#include "net/etcd/etcd_process.h"
#include "net/file_store.h"

namespace dagsim::net {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using rendezvous::RendezvousParameters;
using std::chrono::seconds;

uint16_t free_port() {
  asio::io_context io;
  tcp::acceptor probe(io, tcp::endpoint(tcp::v4(), 0));
  return probe.local_endpoint().port();
}

RendezvousParameters c10d_params(uint16_t port, std::map<std::string, std::string> config = {
                                                    {"is_host", "true"}, {"store_type", "tCp"}, {"read_timeout", "10"}}) {
  return RendezvousParameters("c10d", "localhost:" + std::to_string(port), "dummy_run_id", 1, 1, std::move(config));
}

// Runs `body` on a fiber of a fresh StoreHost, with a context naming this process.
template <typename F>
void on_host(F body) {
  tcpstore::StoreHost host("rdzv-test");
  RendezvousContext context{&host, {"localhost", 1, 0}, nullptr};
  host.run([&] { body(host, context); });
}

// What _assert_create_backend_returns_backend checks, and then a round over it.
void expect_usable(Rendezvous& made, const std::string& backend, runtime::Duration read_timeout) {
  EXPECT_EQ(made.get_backend(), backend);
  EXPECT_EQ(made.get_run_id(), "dummy_run_id");
  EXPECT_EQ(made.read_timeout(), read_timeout);
  EXPECT_EQ(made.store().timeout(), read_timeout);
  const rendezvous::RendezvousInfo info = made.handler().next_rendezvous();
  EXPECT_EQ(info.world_size, 1u);
  EXPECT_EQ(info.rank, 0u);
  EXPECT_TRUE(made.store().check({rendezvous::state_key("dummy_run_id")}));
  EXPECT_TRUE(made.handler().shutdown());
}

// A TCPStore already served on `port` by someone else (PyTorch's tests make one with is_master).
struct OtherServer {
  OtherServer(tcpstore::StoreHost& host, uint16_t port) {
    tcp::acceptor acceptor(host.io(), tcp::endpoint(tcp::v4(), port));
    server = std::make_unique<tcpstore::TcpStoreServer>(host.io(), host.spawner(), std::move(acceptor),
                                                        std::make_shared<store::KeyValueTable>());
  }
  ~OtherServer() { server->close(); }
  std::unique_ptr<tcpstore::TcpStoreServer> server;
};

// c10d CreateBackendTest.test_create_backend_returns_backend (tcp here, file below)
TEST(C10dCreateBackendTest, CreateBackendReturnsBackend) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    std::unique_ptr<Rendezvous> made = create_c10d_handler(c10d_params(port), context);
    ASSERT_NE(made->server(), nullptr) << "is_host=true hosts the store";
    EXPECT_EQ(made->endpoint(), (rendezvous::RendezvousEndpoint{"localhost", port}));
    EXPECT_EQ(made->server()->port(), port);
    expect_usable(*made, "c10d", seconds(10));
  });
}

// The same with store_type file: the endpoint is the file's path, the store waits up to its own
// 300 s (read_timeout is the TCPStore's), and a second process's store on the path sees the state.
TEST(C10dCreateBackendTest, CreateBackendReturnsBackendOnAFile) {
  const std::string path = ::testing::TempDir() + "/dagsim_c10d_file_" + std::to_string(::getpid());
  std::filesystem::remove(path);
  on_host([&](tcpstore::StoreHost& host, const RendezvousContext& context) {
    RendezvousParameters params = c10d_params(0, {{"store_type", "fIlE"}, {"read_timeout", "10"}});
    params.set_endpoint(path);
    std::unique_ptr<Rendezvous> made = create_c10d_handler(params, context);
    EXPECT_EQ(made->server(), nullptr);
    EXPECT_EQ(made->endpoint().host, path);
    expect_usable(*made, "c10d", std::chrono::seconds(300));
    FileStore other(path, host.clock());
    EXPECT_GT(other.get_versioned(rendezvous::state_key("dummy_run_id")).version, 0u);
  });
  std::filesystem::remove(path);
}

// test_create_backend_returns_backend_if_endpoint_file_is_not_specified: a new temporary file.
TEST(C10dCreateBackendTest, CreateBackendReturnsBackendIfEndpointFileIsNotSpecified) {
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    RendezvousParameters params = c10d_params(0, {{"store_type", "file"}});
    params.set_endpoint("");
    std::unique_ptr<Rendezvous> made = create_c10d_handler(params, context);
    const std::string path = made->endpoint().host;
    EXPECT_FALSE(path.empty());
    EXPECT_TRUE(std::filesystem::is_regular_file(path)) << path;
    EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << "readable and writable only by this user, as mkstemp makes it";
    expect_usable(*made, "c10d", std::chrono::seconds(300));
    made.reset();
    std::filesystem::remove(path);
  });
}

// test_create_backend_raises_error_if_tempfile_creation_fails
TEST(C10dCreateBackendTest, CreateBackendRaisesErrorIfTempfileCreationFails) {
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  ::setenv("TMPDIR", "/nonexistent-dagsim-tmpdir", 1);
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    RendezvousParameters params = c10d_params(0, {{"store_type", "file"}});
    params.set_endpoint("");
    EXPECT_TRUE(throws_error([&] { create_c10d_handler(params, context); }, ErrorCode::rendezvous_connection_failed,
                             {"The file creation for C10d store has failed.", "/nonexistent-dagsim-tmpdir/"}));
  });
  if (before) {
    ::setenv("TMPDIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TMPDIR");
  }
}

// test_create_backend_raises_error_if_file_path_is_invalid
TEST(C10dCreateBackendTest, CreateBackendRaisesErrorIfFilePathIsInvalid) {
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    RendezvousParameters params = c10d_params(0, {{"store_type", "file"}});
    params.set_endpoint("/nonexistent-dagsim-dir/store");
    EXPECT_TRUE(throws_error([&] { create_c10d_handler(params, context); }, ErrorCode::rendezvous_connection_failed,
                             {"The connection to the C10d store has failed.", "/nonexistent-dagsim-dir/store"}));
  });
}

// test_create_backend_returns_backend_if_is_host_is_false
TEST(C10dCreateBackendTest, CreateBackendReturnsBackendIfIsHostIsFalse) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost& host, const RendezvousContext& context) {
    OtherServer other(host, port);
    std::unique_ptr<Rendezvous> made =
        create_c10d_handler(c10d_params(port, {{"is_host", "false"}, {"read_timeout", "10"}}), context);
    EXPECT_EQ(made->server(), nullptr);
    expect_usable(*made, "c10d", seconds(10));
    EXPECT_EQ(other.server->stats().queries > 0, true) << "the round went through the other server";
  });
}

// test_create_backend_returns_backend_if_is_host_is_not_specified: localhost names this machine.
TEST(C10dCreateBackendTest, CreateBackendReturnsBackendIfIsHostIsNotSpecified) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    std::unique_ptr<Rendezvous> made = create_c10d_handler(c10d_params(port, {{"read_timeout", "10"}}), context);
    EXPECT_NE(made->server(), nullptr);
    expect_usable(*made, "c10d", seconds(10));
  });
}

// test_create_backend_returns_backend_if_is_host_is_not_specified_and_store_already_exists:
// hosting fails, so it joins the store that is there.
TEST(C10dCreateBackendTest, CreateBackendReturnsBackendIfIsHostIsNotSpecifiedAndStoreAlreadyExists) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost& host, const RendezvousContext& context) {
    OtherServer other(host, port);
    std::vector<std::string> lines;
    RendezvousContext logged = context;
    logged.log = [&](const std::string& line) { lines.push_back(line); };
    std::unique_ptr<Rendezvous> made = create_c10d_handler(c10d_params(port, {{"read_timeout", "10"}}), logged);
    EXPECT_EQ(made->server(), nullptr);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("joining it as a client"), std::string::npos) << lines[0];
    expect_usable(*made, "c10d", seconds(10));
  });
}

// test_create_backend_returns_backend_if_endpoint_port_is_not_specified: PyTorch patches the
// default port; here the endpoint without a port is looked for on 29400, which the failure names.
TEST(C10dCreateBackendTest, CreateBackendUsesTheDefaultPortIfEndpointPortIsNotSpecified) {
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    RendezvousParameters params = c10d_params(0, {{"is_host", "false"}, {"read_timeout", "1"}});
    params.set_endpoint("127.0.0.1");
    try {
      create_c10d_handler(params, context);
      GTEST_SKIP() << "a store answers on port 29400 here";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::rendezvous_connection_failed);
      EXPECT_NE(std::string(e.what()).find("127.0.0.1:29400"), std::string::npos) << e.what();
    }
  });
}

// test_create_backend_returns_backend_if_store_type_is_not_specified,
// test_create_backend_returns_backend_if_read_timeout_is_not_specified: tcp, 60 s.
TEST(C10dCreateBackendTest, CreateBackendReturnsBackendIfStoreTypeAndReadTimeoutAreNotSpecified) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    std::unique_ptr<Rendezvous> made = create_c10d_handler(c10d_params(port, {{"is_host", "true"}}), context);
    expect_usable(*made, "c10d", seconds(60));
  });
}

// test_create_backend_raises_error_if_store_is_unreachable: within its read timeout, at creation.
TEST(C10dCreateBackendTest, CreateBackendRaisesErrorIfStoreIsUnreachable) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost& host, const RendezvousContext& context) {
    const runtime::TimePoint start = host.clock().now();
    EXPECT_TRUE(throws_error(
        [&] { create_c10d_handler(c10d_params(port, {{"is_host", "false"}, {"read_timeout", "1"}}), context); },
        ErrorCode::rendezvous_connection_failed,
        {"The connection to the C10d store has failed. See inner exception for details.",
         "localhost:" + std::to_string(port)}));
    // It tried again until its next try would pass the read timeout (backoff at most 500 ms), and
    // no longer than that timeout and a margin for a busy machine.
    EXPECT_GE(host.clock().now() - start, std::chrono::milliseconds(500)) << "it tried for its read timeout";
    EXPECT_LE(host.clock().now() - start, std::chrono::seconds(6));
  });
}

// test_create_backend_raises_error_if_endpoint_is_invalid, hosting or not
TEST(C10dCreateBackendTest, CreateBackendRaisesErrorIfEndpointIsInvalid) {
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    for (const char* is_host : {"True", "False"}) {
      RendezvousParameters params = c10d_params(0, {{"is_host", is_host}, {"read_timeout", "1"}});
      params.set_endpoint("dummy_endpoint");
      EXPECT_TRUE(throws_error([&] { create_c10d_handler(params, context); }, ErrorCode::rendezvous_connection_failed,
                               {"The connection to the C10d store has failed.", "cannot resolve host 'dummy_endpoint'"}))
          << is_host;
    }
  });
}

// test_create_backend_raises_error_if_store_type_is_invalid,
// test_create_backend_raises_error_if_read_timeout_is_invalid
TEST(C10dCreateBackendTest, CreateBackendRaisesErrorIfStoreTypeOrReadTimeoutIsInvalid) {
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    EXPECT_TRUE(throws_error([&] { create_c10d_handler(c10d_params(1, {{"store_type", "dummy_store_type"}}), context); },
                             ErrorCode::invalid_argument,
                             {"Invalid store type given. Currently only supports file and tcp."}));
    for (const char* timeout : {"0", "-10"}) {
      EXPECT_TRUE(throws_error([&] { create_c10d_handler(c10d_params(1, {{"read_timeout", timeout}}), context); },
                               ErrorCode::invalid_argument, {"The read timeout must be a positive integer."}))
          << timeout;
    }
  });
}

// dynamic_rendezvous_test.py CreateHandlerTest.test_create_handler_returns_handler and
// DynamicRendezvousHandlerFromBackendTest.test_init_initializes_handler: the handler carries the
// backend's name, the run id, the node bounds and the timeouts from the parameters.
TEST(CreateHandlerTest, CreateHandlerReturnsHandler) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    RendezvousParameters params("c10d", "localhost:" + std::to_string(port), "dummy_run_id", 2, 3,
                                {{"join_timeout", "50"}, {"last_call_timeout", "60"}, {"close_timeout", "70"}});
    std::unique_ptr<Rendezvous> made = default_rendezvous_registry().create_handler(params, context);
    EXPECT_EQ(made->handler().get_backend(), "c10d");
    EXPECT_EQ(made->handler().get_run_id(), "dummy_run_id");
    const rendezvous::RendezvousSettings& s = made->handler().settings();
    EXPECT_EQ(s.min_nodes, 2u);
    EXPECT_EQ(s.max_nodes, 3u);
    EXPECT_EQ(s.timeout.join, seconds(50));
    EXPECT_EQ(s.timeout.last_call, seconds(60));
    EXPECT_EQ(s.timeout.close, seconds(70));
    EXPECT_EQ(made->handler().node(), context.node);
  });
}

// CreateHandlerTest.test_create_handler_records_and_raises_exceptions: the handler's own refusal
// comes out of create_handler.
TEST(CreateHandlerTest, CreateHandlerRaisesTheHandlersExceptions) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    EXPECT_TRUE(throws_error(
        [&] { default_rendezvous_registry().create_handler(c10d_params(port, {{"join_timeout", "0"}}), context); },
        ErrorCode::invalid_argument, {"The join timeout (0s) must be positive."}));
  });
}

// A creator that records what it was given and makes a c10d rendezvous, possibly misnamed.
const RendezvousParameters* seen = nullptr;
std::unique_ptr<Rendezvous> recording_creator(const RendezvousParameters& params, const RendezvousContext& context) {
  seen = &params;
  return create_c10d_handler(params, context);
}
std::unique_ptr<Rendezvous> misnaming_creator(const RendezvousParameters& params, const RendezvousContext& context) {
  const RendezvousParameters renamed("c10d", params.endpoint(), params.run_id(), params.min_nodes(), params.max_nodes(),
                                     params.config());
  return create_c10d_handler(renamed, context);
}

// RendezvousHandlerRegistryTest.test_register_registers_once_if_called_twice_with_same_creator,
// test_register_raises_error_if_called_twice_with_different_creators
TEST(RendezvousHandlerRegistryTest, RegisterTwiceWithTheSameCreatorOnlyAndNeverAnEmptyName) {
  RendezvousHandlerRegistry registry;
  registry.register_backend("dummy_backend", recording_creator);
  EXPECT_NO_THROW(registry.register_backend("dummy_backend", recording_creator));
  EXPECT_TRUE(throws_error([&] { registry.register_backend("dummy_backend", misnaming_creator); },
                           ErrorCode::invalid_argument,
                           {"The rendezvous backend 'dummy_backend' cannot be registered with another creator"}));
  EXPECT_TRUE(throws_error([&] { registry.register_backend("", recording_creator); }, ErrorCode::invalid_argument,
                           {"The rendezvous backend name must be a non-empty string."}));
}

// RendezvousHandlerRegistryTest.test_create_handler_returns_handler: the creator gets the same
// parameters.
TEST(RendezvousHandlerRegistryTest, CreateHandlerReturnsHandler) {
  const uint16_t port = free_port();
  RendezvousHandlerRegistry registry;
  registry.register_backend("c10d", recording_creator);
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    const RendezvousParameters params = c10d_params(port);
    seen = nullptr;
    std::unique_ptr<Rendezvous> made = registry.create_handler(params, context);
    EXPECT_EQ(seen, &params);
    EXPECT_EQ(made->get_backend(), "c10d");
  });
}

// test_create_handler_raises_error_if_backend_is_not_registered,
// test_create_handler_raises_error_if_backend_names_do_not_match
TEST(RendezvousHandlerRegistryTest, CreateHandlerRaisesErrorIfBackendIsUnknownOrItsHandlerIsMisnamed) {
  const uint16_t port = free_port();
  RendezvousHandlerRegistry registry;
  registry.register_backend("dummy_backend", misnaming_creator);
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    const RendezvousParameters unknown("dummy_backend_2", "localhost:1", "r", 1, 1);
    EXPECT_TRUE(throws_error([&] { registry.create_handler(unknown, context); }, ErrorCode::invalid_argument,
                             {"The rendezvous backend 'dummy_backend_2' is not registered. Did you forget to call"}));
    const RendezvousParameters params("dummy_backend", "localhost:" + std::to_string(port), "r", 1, 1,
                                      {{"is_host", "true"}});
    EXPECT_TRUE(throws_error([&] { registry.create_handler(params, context); }, ErrorCode::invalid_argument,
                             {"The rendezvous backend 'c10d' does not match the requested backend 'dummy_backend'."}));
  });
}

RendezvousParameters etcd_params(const std::string& backend, const etcd::EtcdEndpoint& endpoint,
                                 std::map<std::string, std::string> config) {
  return RendezvousParameters(backend, endpoint.host + ":" + std::to_string(endpoint.port), "dummy_run_id", 1, 1,
                              std::move(config));
}

// etcd_rendezvous_backend_test.py CreateBackendTest.test_create_backend_returns_backend,
// _if_protocol_is_not_specified, _if_read_timeout_is_not_specified
TEST(EtcdCreateBackendTest, CreateBackendReturnsBackend) {
  if (const auto why = etcd::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  etcd::EtcdProcess etcd;
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    std::unique_ptr<Rendezvous> made = create_etcd_handler(
        etcd_params("etcd-v2", etcd.endpoint(), {{"read_timeout", "10"}, {"protocol", "hTTp"}}), context);
    EXPECT_EQ(made->server(), nullptr);
    expect_usable(*made, "etcd-v2", seconds(10));
  });
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    std::unique_ptr<Rendezvous> made = create_etcd_handler(etcd_params("etcd-v2", etcd.endpoint(), {}), context);
    EXPECT_EQ(made->read_timeout(), seconds(60));
  });
}

// test_create_backend_raises_error_if_etcd_is_unreachable
TEST(EtcdCreateBackendTest, CreateBackendRaisesErrorIfEtcdIsUnreachable) {
  const uint16_t port = free_port();
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    EXPECT_TRUE(throws_error(
        [&] { create_etcd_handler(etcd_params("etcd-v2", {"127.0.0.1", port}, {{"read_timeout", "1"}}), context); },
        ErrorCode::rendezvous_connection_failed,
        {"The connection to etcd has failed. See inner exception for details.", std::to_string(port)}));
  });
}

// test_create_backend_raises_error_if_protocol_is_invalid, _if_read_timeout_is_invalid; and
// https, which dagsim's client does not speak, refused by name.
TEST(EtcdCreateBackendTest, CreateBackendRaisesErrorIfProtocolOrReadTimeoutIsInvalid) {
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    const etcd::EtcdEndpoint nowhere{"127.0.0.1", 1};
    EXPECT_TRUE(throws_error([&] { create_etcd_handler(etcd_params("etcd-v2", nowhere, {{"protocol", "dummy"}}), context); },
                             ErrorCode::invalid_argument, {"The protocol must be HTTP or HTTPS."}));
    EXPECT_TRUE(throws_error([&] { create_etcd_handler(etcd_params("etcd-v2", nowhere, {{"protocol", "https"}}), context); },
                             ErrorCode::invalid_argument, {"https", "HTTP only"}));
    for (const char* timeout : {"0", "-10"}) {
      EXPECT_TRUE(throws_error(
          [&] { create_etcd_handler(etcd_params("etcd-v2", nowhere, {{"read_timeout", timeout}}), context); },
          ErrorCode::invalid_argument, {"The read timeout must be a positive integer."}));
    }
  });
}

// etcd_rendezvous_test.py EtcdRendezvousTest.test_etcd_rdzv_basic_params,
// test_etcd_rdzv_additional_params, test_get_backend: the name "etcd" gives a handler that says
// so, with the run id asked for (dagsim's dynamic rendezvous, not 1.13's older etcd algorithm).
TEST(EtcdRendezvousTest, TheEtcdNameGivesAHandlerWithItsRunIdAndBackend) {
  if (const auto why = etcd::EtcdProcess::unavailable()) GTEST_SKIP() << *why;
  etcd::EtcdProcess etcd;
  on_host([&](tcpstore::StoreHost&, const RendezvousContext& context) {
    std::unique_ptr<Rendezvous> made = default_rendezvous_registry().create_handler(
        etcd_params("etcd", etcd.endpoint(), {{"timeout", "60"}, {"last_call_timeout", "5"}}), context);
    EXPECT_EQ(made->get_backend(), "etcd");
    EXPECT_EQ(made->get_run_id(), "dummy_run_id");
    EXPECT_EQ(made->handler().settings().timeout.last_call, seconds(5));
  });
}

}  // namespace
}  // namespace dagsim::net
