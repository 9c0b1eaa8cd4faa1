// Nodes started by hand, as on other hosts (docs/tcp.md, "Across hosts"; issue 22, item 4): the
// launcher's scenario and seed are the run's, a node with another copy refuses naming both digests
// and the launcher ends the run at once, and a node's death is heard through its control link and
// judged as a local child's death is. Every "host" is loopback here; each node has its own records
// folder, as it would on its own host, and its own credential directory (`dagsim credentials`, as
// docs/tcp.md says; issue 49): nothing without a certificate of the run's CA naming a node of the
// run reaches any port of it, the control port included. One run uses a shared secret instead.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>

#include <thread>

#include "conformance/transport_test_util.h"
#include "net/credentials.h"

namespace dagsim::cli::testing {
namespace {

const std::string kSecretEnv = "DAGSIM_SECRET=a-secret-both-hosts-share ";

// One run across two "hosts": a peers file with two free ports and a control port, and a CA with a
// credential directory for worker0, worker1 and the launcher (or a shared secret).
struct TwoHosts {
  explicit TwoHosts(const std::string& name, bool shared_secret = false)
      : dir(temp_dir() / name), control(free_port()), shared_secret(shared_secret) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    peers = (dir / "peers.json").string();
    ports = {free_port(), free_port()};
    std::ofstream(peers) << R"({"cluster_id": "0x0123456789abcdef", "nodes": [)"
                         << R"({"name": "worker0", "host": "127.0.0.1", "port": )" << ports[0] << "},"
                         << R"({"name": "worker1", "host": "127.0.0.1", "port": )" << ports[1] << "}]}";
    if (!shared_secret) {
      const std::string ca = (dir / "ca").string();
      EXPECT_EQ(dagsim("credentials ca --ca " + ca).exit_code, 0);
      EXPECT_EQ(dagsim("credentials issue --ca " + ca + " --out " + (dir / "creds").string() + " worker0 worker1 launcher").exit_code, 0);
    }
  }
  // The environment `name`'s process is started with: its own credential directory only.
  std::string env(const std::string& name) const {
    return shared_secret ? kSecretEnv : "DAGSIM_CREDENTIALS=" + (dir / "creds" / name).string() + " ";
  }
  // `dagsim node` as the operator of `name`'s host starts it, with that host's copy of the scenario.
  std::string node(const std::string& name, const std::string& scenario) const {
    return env(name) + DAGSIM_BINARY + " node --scenario " + scenario + " --peers " + peers + " --control 127.0.0.1:" +
           std::to_string(control) + " --name " + name + " --records " + (dir / ("host-" + name)).string() + " 2>" +
           (dir / (name + ".err")).string();
  }
  // The launcher: its report in out.json, its stderr in err.txt, its exit code in code, how long it
  // ran (ms) in elapsed.
  std::string launcher(const std::string& scenario, const std::string& flags) const {
    return "start=$(date +%s%N); " + env("launcher") + "timeout 120 " + DAGSIM_BINARY + " run " + scenario + " --transport tcp --json --peers " + peers +
           " --control-port " + std::to_string(control) + " --records " + (dir / "run").string() + flags + " > " +
           (dir / "out.json").string() + " 2>" + (dir / "err.txt").string() + "; echo $? > " + (dir / "code").string() +
           "; echo $(( ($(date +%s%N) - start) / 1000000 )) > " + (dir / "elapsed").string();
  }
  json report() const { return json::parse(slurp(dir / "out.json"), nullptr, false); }
  std::string code() const { return slurp(dir / "code"); }

  fs::path dir;
  uint16_t control;
  bool shared_secret;
  std::string peers;
  std::vector<uint16_t> ports;
};

std::string sha256_of(const std::string& file) {
  FILE* pipe = popen(("sha256sum " + file).c_str(), "r");
  char buffer[65] = {};
  const size_t n = pipe == nullptr ? 0 : fread(buffer, 1, 64, pipe);
  if (pipe != nullptr) pclose(pipe);
  return std::string(buffer, n);
}

void join_and_run_seed_42(const TwoHosts& hosts, const std::string& file, const std::string& command) {
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(hosts.code(), "0\n") << slurp(hosts.dir / "err.txt");
  const json tcp = hosts.report();
  ASSERT_TRUE(tcp.is_object()) << slurp(hosts.dir / "out.json");
  EXPECT_TRUE(tcp["passed"].get<bool>()) << tcp.dump(1);
  EXPECT_EQ(tcp["seed"], 42);
  const json sim = run_json(file, "sim", 0, " --seed 42");
  const json sim_seed_1 = run_json(file, "sim");
  ASSERT_NE(sim["gradients"], sim_seed_1["gradients"]) << "the seed must matter for this to test anything";
  expect_close(sim["gradients"], tcp["gradients"], "gradients");
  EXPECT_EQ(dagsim("judge " + (hosts.dir / "run").string()).exit_code, 0);
}

// The run of docs/tcp.md's two hosts, on one, at the launcher's --seed 42 (the nodes are given no
// seed: they run the launcher's): the gathered records give the simulator's gradients of seed 42,
// and the same verdict again through `dagsim judge`. Twice, with the same folders: a node's first
// life in the second run is incarnation 0 again, not a restart (which would not drive the program).
TEST(HandStartedNodes, JoinALauncherThroughItsControlPortAndRunItsSeed) {
  const TwoHosts hosts("two-hosts");
  const std::string file = example("seed_example");
  const std::string command = "(" + hosts.node("worker0", file) + " & " + hosts.node("worker1", file) + " & " +
                              hosts.launcher(file, " --seed 42") + "; wait)";
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    join_and_run_seed_42(hosts, file, command);
  }
}

// The same with the shared secret the operator may still choose (one identity for the run).
TEST(HandStartedNodes, JoinWithASharedSecretInstead) {
  const TwoHosts hosts("two-hosts-secret", true);
  const std::string file = example("seed_example");
  join_and_run_seed_42(hosts, file, "(" + hosts.node("worker0", file) + " & " + hosts.node("worker1", file) + " & " +
                                        hosts.launcher(file, " --seed 42") + "; wait)");
  EXPECT_NE(slurp(hosts.dir / "err.txt").find("every process holding it can speak as any other"), std::string::npos);
}

// A heartbeat run of two nodes lasting `duration_ms`, written as `name`.toml.
std::string heartbeat_run(const std::string& name = "hand_kill", int duration_ms = 3000) {
  return write_scenario(name + ".toml", "name = \"" + name + "\"\n[cluster]\nnodes = 2\n[heartbeat]\nmonitor = \"worker0\"\n"
                                         "interval_ms = 100\nmax_attempts = 3\nduration_ms = " + std::to_string(duration_ms) + "\n")
      .string();
}

// A connection to `port` on loopback that speaks TLS 1.3 with `credential` (none: no certificate)
// and then waits: true if the peer is still talking to it 3 s later (it was let in), false once it
// refused (an alert, or the connection closed). Garbage instead of TLS when `garbage`.
bool let_in(uint16_t port, const std::optional<net::NodeCredential>& credential, bool garbage = false) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(port);
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&at), sizeof(at)) != 0) {
    ADD_FAILURE() << "nothing listens on port " << port << ": the probe proves nothing";
    ::close(fd);
    return false;
  }
  const auto closed_within_3s = [fd](SSL* ssl) {
    for (int i = 0; i < 30; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char byte;
      if (ssl == nullptr) return ::recv(fd, &byte, 1, 0) <= 0;
      if (SSL_read(ssl, &byte, 1) <= 0) return true;  // an alert, or the end
    }
    return false;
  };
  bool refused = false;
  if (garbage) {
    const std::string hello(64, 'x');
    (void)!::write(fd, hello.data(), hello.size());
    refused = closed_within_3s(nullptr);
  } else {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    if (credential) {
      BIO* b = BIO_new_mem_buf(credential->certificate_pem.data(), static_cast<int>(credential->certificate_pem.size()));
      X509* cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
      BIO_free(b);
      b = BIO_new_mem_buf(credential->key_pem.data(), static_cast<int>(credential->key_pem.size()));
      EVP_PKEY* key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
      BIO_free(b);
      SSL_CTX_use_certificate(ctx, cert);
      SSL_CTX_use_PrivateKey(ctx, key);
      X509_free(cert);
      EVP_PKEY_free(key);
    }
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    refused = SSL_connect(ssl) != 1 || closed_within_3s(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
  }
  ::close(fd);
  return !refused;
}

// The issue's test: while a run of hand-started nodes goes on, every port of it (both nodes' and
// the launcher's control port) refuses a peer with no certificate, one from another CA, and one of
// the run's own CA naming no node of the run, and garbage; the run is not disturbed.
TEST(HandStartedNodes, NothingWithoutTheRunsCredentialsReachesAnyPortOfIt) {
  const TwoHosts hosts("no-credentials");
  // Long enough for every probe (one that is let in takes 3 s to tell).
  const std::string file = heartbeat_run("probed", 8000);
  ASSERT_EQ(dagsim("credentials issue --ca " + (hosts.dir / "ca").string() + " --out " + (hosts.dir / "creds").string() +
                   " mallory").exit_code, 0);
  const net::NodeCredential mallory = net::NodeCredential::load((hosts.dir / "creds" / "mallory").string());
  net::CertificateAuthority other = net::CertificateAuthority::create("another CA");
  const net::NodeCredential foreign = other.issue("worker1");
  std::map<std::string, bool> let_in_by;
  std::thread prober([&] {
    if (wait_for_processes("--name worker1 --records " + (hosts.dir / "host-worker1").string(), 1).empty()) return;
    std::this_thread::sleep_for(500ms);
    const std::vector<std::pair<std::string, uint16_t>> ports = {
        {"worker0", hosts.ports[0]}, {"worker1", hosts.ports[1]}, {"control", hosts.control}};
    for (const auto& [name, port] : ports) {
      let_in_by[name + " without a certificate"] = let_in(port, std::nullopt);
      let_in_by[name + " with another CA's"] = let_in(port, foreign);
      let_in_by[name + " with mallory's"] = let_in(port, mallory);
      let_in_by[name + " with garbage"] = let_in(port, std::nullopt, true);
    }
  });
  std::system(("(" + hosts.node("worker0", file) + " & " + hosts.node("worker1", file) + " & " +
               hosts.launcher(file, "") + "; wait)").c_str());
  prober.join();
  ASSERT_EQ(let_in_by.size(), 12u);
  for (const auto& [probe, in] : let_in_by) EXPECT_FALSE(in) << probe << " was let in";
  EXPECT_EQ(hosts.code(), "0\n") << slurp(hosts.dir / "err.txt");
  const std::string launcher_err = slurp(hosts.dir / "err.txt");
  EXPECT_NE(launcher_err.find("refused a control connection"), std::string::npos) << launcher_err;
}

// worker1's host has an edited copy: it refuses to run, naming both digests, and the launcher ends
// the run within seconds with the same message (exit 2), not after its 300 s wait.
TEST(HandStartedNodes, ANodeWithAnotherScenarioCopyRefusesNamingBothDigests) {
  const TwoHosts hosts("other-copy");
  const std::string file = example("seed_example");
  const std::string edited = (hosts.dir / "seed_example.toml").string();
  std::ofstream(edited) << slurp(file) << "# edited on worker1's host\n";
  // worker0 may find no launcher left to join: it gives up after its own minute unless ended here.
  const std::string command = "(" + hosts.node("worker0", file) + " & w0=$!; " + hosts.node("worker1", edited) + " & " +
                              hosts.launcher(file, "") + "; kill $w0 2>/dev/null; wait)";
  std::system(command.c_str());
  EXPECT_LT(std::stoi("0" + slurp(hosts.dir / "elapsed")), 20'000) << "the launcher ends the run within seconds";
  EXPECT_EQ(hosts.code(), "2\n");
  const std::string err = slurp(hosts.dir / "err.txt");
  const std::string ours = sha256_of(file), theirs = sha256_of(edited);
  ASSERT_EQ(ours.size(), 64u);
  EXPECT_NE(ours, theirs);
  EXPECT_NE(err.find("worker1 refused to run"), std::string::npos) << err;
  EXPECT_NE(err.find("sha256 " + ours), std::string::npos) << err;
  EXPECT_NE(err.find("sha256 " + theirs), std::string::npos) << err;
  EXPECT_NE(slurp(hosts.dir / "worker1.err").find("sha256 " + theirs), std::string::npos) << slurp(hosts.dir / "worker1.err");
}

// A heartbeat run of three seconds (heartbeat_run()) in which worker1's process is killed (kill -9,
// by nobody the scenario knows of) 1.5 s in: the same death under the local launcher and with
// nodes started by hand: the same verdict, a
// failure naming worker1 (PyTorch's agent would call a worker that vanished a failure too).
TEST(HandStartedNodes, AKillOfAHandStartedNodeIsJudgedAsUnderTheLocalLauncher) {
  const std::string file = heartbeat_run();
  // Local: the launcher's own child, killed from outside.
  const std::string records = (temp_dir() / "local-kill").string();
  const std::string local_out = (temp_dir() / "local-kill.json").string();
  const std::string local = "(" + std::string(DAGSIM_BINARY) + " run " + file + " --transport tcp --json --records " +
                            records + " > " + local_out + " 2>/dev/null & wait)";
  std::thread killer([&] {
    const std::vector<int> pids = wait_for_processes("--name worker1 --peers " + records, 1);
    if (pids.empty()) return;
    std::this_thread::sleep_for(1500ms);
    ::kill(pids[0], SIGKILL);
  });
  std::system(local.c_str());
  killer.join();
  const json by_launcher = json::parse(slurp(local_out), nullptr, false);
  ASSERT_TRUE(by_launcher.is_object()) << slurp(local_out);

  const TwoHosts hosts("hand-kill");
  const std::string command = "(" + hosts.node("worker0", file) + " & " + hosts.node("worker1", file) +
                              " & pid=$!; (sleep 2.5; kill -9 $pid) & " + hosts.launcher(file, "") + "; wait)";
  std::system(command.c_str());
  const json by_hand = hosts.report();
  ASSERT_TRUE(by_hand.is_object()) << slurp(hosts.dir / "out.json") << slurp(hosts.dir / "err.txt");

  EXPECT_FALSE(by_launcher["passed"].get<bool>()) << by_launcher.dump(1);
  EXPECT_EQ(verdicts(by_launcher), verdicts(by_hand)) << by_launcher["checks"].dump(1) << by_hand["checks"].dump(1);
  EXPECT_EQ(hosts.code(), "1\n");
  EXPECT_NE(by_hand["checks"].dump().find("worker1"), std::string::npos) << by_hand["checks"].dump(1);
}

TEST(HandStartedNodes, APauseIsRefusedBeforeTheRun) {
  const std::string file = write_scenario("paused.toml", R"(name = "paused"
[cluster]
nodes = 2
[[faults]]
at_ms = 10
kind = "pause"
node = "worker1"
resume_at_ms = 20
[heartbeat]
monitor = "worker0"
interval_ms = 100
max_attempts = 3
duration_ms = 500
)").string();
  const std::string peers = write_scenario("peers.json", R"({"cluster_id": "0x1", "nodes": [
    {"name": "worker0", "host": "127.0.0.1", "port": 1}, {"name": "worker1", "host": "127.0.0.1", "port": 2}]})").string();
  const Output o = dagsim("run " + file + " --transport tcp --peers " + peers);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("paused.toml:4: a pause (stopping and continuing a process) needs the node's own host"), std::string::npos) << o.err;
}

// Something that takes the control port's connections and never answers (not a launcher, or a
// stopped one) holds a node for the handshake's 10 s at most: it exits 2, saying so.
TEST(HandStartedNodes, ANodeWhoseLauncherNeverAnswersGivesUpNamingIt) {
  const TwoHosts hosts("silent-launcher");
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(hosts.control);
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  ::setsockopt(silent, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ASSERT_EQ(::bind(silent, reinterpret_cast<const sockaddr*>(&at), sizeof(at)), 0);
  ASSERT_EQ(::listen(silent, 8), 0);  // connections complete in the backlog; nothing is said
  const auto start = std::chrono::steady_clock::now();
  std::string command = hosts.node("worker0", example("seed_example"));
  command.insert(hosts.env("worker0").size(), "timeout 60 ");  // after the environment it sets
  const int code = std::system(command.c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(silent);
  ASSERT_TRUE(WIFEXITED(code));
  EXPECT_EQ(WEXITSTATUS(code), 2) << slurp(hosts.dir / "worker0.err");
  EXPECT_LT(seconds, 30.0);
  EXPECT_NE(slurp(hosts.dir / "worker0.err").find("no handshake from the launcher within 10 s"), std::string::npos)
      << slurp(hosts.dir / "worker0.err");
}

}  // namespace
}  // namespace dagsim::cli::testing
