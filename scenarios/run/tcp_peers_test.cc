// Tests of the peers file and HOST:PORT arguments (issue 23, item 6): read like the scenario (a
// regular file of bounded size; devices, FIFOs and directories refused at once), every value
// checked where it is read (cluster id, hosts, ports, duplicates), and whatever the file holds
// printed escaped and cut, on one line.
#include "scenarios/run/tcp_peers.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/base/error.h"
#include "scenarios/format/scenario_loader.h"

namespace dagsim::scenarios {
namespace {

namespace fs = std::filesystem;

const Scenario& three_nodes() {
  static const Scenario scenario =
      parse_scenario("name = \"p\"\n[cluster]\nnodes = 3\n[rendezvous]\nmin_nodes = 2\n", "p.toml");
  return scenario;
}

class PeersFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dagsim-peers-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const std::string path = (dir_ / "peers.json").string();
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }
  // A peers file of the three nodes with `id` and the hosts and ports given.
  std::string peers(const std::string& id, const std::string& host0 = "127.0.0.1", int port0 = 7000,
                    const std::string& name0 = "worker0") {
    return write("{\"cluster_id\": \"" + id + "\", \"nodes\": [" + "{\"name\": \"" + name0 + "\", \"host\": \"" + host0 +
                 "\", \"port\": " + std::to_string(port0) + "}, " +
                 "{\"name\": \"worker1\", \"host\": \"127.0.0.1\", \"port\": 7001}, " +
                 "{\"name\": \"worker2\", \"host\": \"127.0.0.1\", \"port\": 7002}]}");
  }
  // The detail of the invalid_argument that reading `path` throws ("no error" if none).
  std::string error_of(const std::string& path) {
    try {
      read_peers_file(path, three_nodes());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_EQ(e.detail().find('\n'), std::string::npos) << "one line";
      return e.detail();
    }
    return "no error";
  }

  fs::path dir_;
};

TEST_F(PeersFileTest, DevicesFifosDirectoriesAndHugeFilesAreRefusedAtOnceNamingThePath) {
  EXPECT_EQ(error_of("/dev/zero"), "--peers /dev/zero: cannot read: not a regular file");
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), "--peers " + fifo + ": cannot read: not a regular file");  // never waits for a writer
  EXPECT_EQ(error_of(dir_.string()), "--peers " + dir_.string() + ": cannot read: is a directory");
  const std::string big = write(std::string(kMaxPeersFileBytes + 1, ' '));
  EXPECT_EQ(error_of(big), "--peers " + big + ": is larger than 4 MiB, the limit of a peers file");
  EXPECT_NE(error_of((dir_ / "absent").string()).find("cannot open: No such file"), std::string::npos);
}

TEST_F(PeersFileTest, TheClusterIdIsOneToSixteenHexDigits) {
  EXPECT_EQ(error_of(peers("0x00ff")), "no error");
  EXPECT_EQ(read_peers_file(peers("0x00ff"), three_nodes()).cluster_id, 0xffu);
  EXPECT_EQ(read_peers_file(peers("DEADbeef"), three_nodes()).cluster_id, 0xdeadbeefu);
  for (const char* id : {"-1", "", "0x", " 7", "7 ", "12345678901234567", "0xg"}) {
    EXPECT_NE(error_of(peers(id)).find("cluster_id must be a string of 1 to 16 hex digits"), std::string::npos) << id;
  }
}

TEST_F(PeersFileTest, HostsAndPortsAreCheckedAndNoTwoNodesShareOne) {
  EXPECT_EQ(error_of(peers("1", "::1")), "no error");
  EXPECT_EQ(error_of(peers("1", "node-0.cluster.example")), "no error");
  EXPECT_NE(error_of(peers("1", "")).find("worker0: the host is empty"), std::string::npos) << error_of(peers("1", ""));
  EXPECT_NE(error_of(peers("1", "999.1.1.1")).find("worker0: the host 999.1.1.1 is not an IPv4 address"), std::string::npos);
  EXPECT_NE(error_of(peers("1", "a b")).find("is neither an IP address nor a host name"), std::string::npos);
  EXPECT_NE(error_of(peers("1", "127.0.0.1", 70000)).find("worker0: port 70000 is not in 1..65535"), std::string::npos);
  EXPECT_NE(error_of(peers("1", "127.0.0.1", 7001)).find("worker1 and worker0 are both at 127.0.0.1:7001"), std::string::npos)
      << error_of(peers("1", "127.0.0.1", 7001));
}

TEST_F(PeersFileTest, NamesFromTheFileArePrintedEscapedAndCut) {
  // A newline and a clear-screen escape stay on one line, escaped.
  const std::string escaped = error_of(peers("1", "127.0.0.1", 7000, "wor\\nker\\u001b[2J"));
  EXPECT_NE(escaped.find("nodes[0] is \"wor\\nker\\u001b[2J\"; the scenario's node 0 is worker0"), std::string::npos)
      << escaped;
  EXPECT_EQ(escaped.find('\x1b'), std::string::npos);
  // A name of a million characters is cut to a prefix and its length.
  const std::string cut = error_of(peers("1", "127.0.0.1", 7000, std::string(1000000, 'n')));
  EXPECT_LT(cut.size(), 400u) << cut.substr(0, 400);
  EXPECT_NE(cut.find("(1000000 bytes)"), std::string::npos) << cut;
}

TEST(HostPort, ControlAddressesAreCheckedBeforeAnyWait) {
  const auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_host_port(text, "--control");
    } catch (const Error& e) {
      return e.detail();
    }
    return "no error";
  };
  EXPECT_EQ(error_of("127.0.0.1:99999"), "--control 127.0.0.1:99999: the port 99999 is not in 1..65535");
  EXPECT_EQ(error_of("127.0.0.1:0"), "--control 127.0.0.1:0: the port 0 is not in 1..65535");
  EXPECT_EQ(error_of("127.0.0.1"), "--control 127.0.0.1: expected HOST:PORT");
  EXPECT_EQ(error_of(":80"), "--control :80: the host is empty");
  EXPECT_EQ(error_of("999.1.1.1:80"), "--control 999.1.1.1:80: the host is not an IPv4 address");
  const HostPort v6 = parse_host_port("[::1]:8080", "--control");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 8080);
  EXPECT_EQ(parse_host_port("launcher.example:29400", "--control").port, 29400);
}

}  // namespace
}  // namespace dagsim::scenarios
