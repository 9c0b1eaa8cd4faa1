// EtcdProcess's implementation: started through net/process with the log in the data directory's parent, free
// ports from the kernel, readiness polled with plain blocking sockets (it runs before any fiber).
#include "net/etcd/etcd_process.h"

#include <signal.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/base/error.h"

namespace dagsim::net::etcd {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Two distinct ports the kernel considers free now (both held open until both are chosen).
std::array<uint16_t, 2> free_ports() {
  asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::acceptor b(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  return {a.local_endpoint().port(), b.local_endpoint().port()};
}

// True when etcd answers GET /health with "health":"true" (a blocking probe, bounded by the OS).
bool healthy(const EtcdEndpoint& endpoint) {
  try {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(asio::ip::make_address(endpoint.host), endpoint.port));
    const std::string request = "GET /health HTTP/1.0\r\nHost: " + endpoint.host + "\r\n\r\n";
    asio::write(socket, asio::buffer(request));
    std::string reply;
    boost::system::error_code ec;
    std::array<char, 1024> chunk{};
    for (size_t n = 0; (n = socket.read_some(asio::buffer(chunk), ec)) > 0 && !ec;) reply.append(chunk.data(), n);
    return reply.find("\"health\":\"true\"") != std::string::npos;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::optional<std::string> EtcdProcess::unavailable() {
  if (::access(kBinary, X_OK) != 0) return std::string(kBinary) + " is not installed (Debian's etcd-server: scripts/deps.sh test)";
  return std::nullopt;
}

EtcdProcess::EtcdProcess() {
  if (const auto why = unavailable()) throw errors::invalid_argument(*why);
  std::string pattern = (std::filesystem::temp_directory_path() / "dagsim-etcd-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw errors::invalid_argument("cannot create etcd's directory " + pattern + ": " + std::strerror(errno));
  }
  dir_ = pattern;
  restart();
}

EtcdProcess::~EtcdProcess() {
  kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void EtcdProcess::restart() {
  kill();
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (start_once(/*fresh=*/true)) return;
    kill();  // most likely a port taken between free_ports() and etcd's bind: fresh ports
  }
  throw errors::timed_out("etcd did not get ready; its log ends with:\n" + log_tail());
}

void EtcdProcess::restart_keeping_data() {
  kill();
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (start_once(/*fresh=*/false)) return;
    kill();  // a port taken meanwhile, or etcd not yet letting go of its data: try again
  }
  throw errors::timed_out("etcd did not come back on its ports; its log ends with:\n" + log_tail());
}

bool EtcdProcess::start_once(bool fresh) {
  const std::string data = dir_ + "/data";
  if (fresh) {
    const auto [client, peer] = free_ports();
    endpoint_ = EtcdEndpoint{"127.0.0.1", client};
    peer_port_ = peer;
    std::error_code ignored;
    std::filesystem::remove_all(data, ignored);
  }
  const uint16_t client = endpoint_.port;
  const uint16_t peer = peer_port_;
  log_path_ = dir_ + "/etcd.log";
  const std::string client_url = "http://127.0.0.1:" + std::to_string(client);
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
  std::vector<std::string> args = {kBinary,
                                   "--name=dagsim-test",
                                   "--data-dir=" + data,
                                   "--listen-client-urls=" + client_url,
                                   "--advertise-client-urls=" + client_url,
                                   "--listen-peer-urls=" + peer_url,
                                   "--initial-advertise-peer-urls=" + peer_url,
                                   "--initial-cluster=dagsim-test=" + peer_url,
                                   "--initial-cluster-state=new"};
  ProcessSpec spec;
  spec.argv = std::move(args);
  spec.env = current_environment();
  spec.stdout_path = log_path_;
  spec.stderr_path = log_path_;
  spec.name = "etcd";
  process_ = spawn(spec);
  return wait_ready(7000);
}

bool EtcdProcess::wait_ready(int milliseconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(milliseconds);
  while (std::chrono::steady_clock::now() < until) {
    if (process_.poll()) return false;  // it exited (a port taken?): the caller tries again
    if (healthy(endpoint_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void EtcdProcess::kill() {
  if (!process_.running()) return;
  process_.kill();
  process_.wait();
}

// Returns once the whole process is stopped (Process::signal waits for the stop): on a busy machine
// etcd could otherwise answer a request or two before every one of its threads has stopped.
void EtcdProcess::pause() { process_.signal(SIGSTOP); }

void EtcdProcess::resume() { process_.signal(SIGCONT); }

std::string EtcdProcess::log_tail(size_t bytes) const {
  std::ifstream in(log_path_);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

}  // namespace dagsim::net::etcd
