// StoreRecorder (store_recorder.h).
#include "net/tcpstore/store_recorder.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/base/error.h"
#include "net/crypto.h"

namespace dagsim::net::tcpstore {

namespace {

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json hex_or_null(const std::optional<Bytes>& bytes) { return bytes ? nlohmann::json(hex_of(*bytes)) : nlohmann::json(); }

// An endpoint as the kernel's /proc/net/tcp{,6} print it: the address as 32-bit words in host
// (little-endian) order, then the port, all upper-case hex.
std::string proc_form(const boost::asio::ip::address& address, uint16_t port) {
  std::string out;
  char buf[8];
  const auto words = [&](const uint8_t* bytes, size_t n) {
    for (size_t w = 0; w < n; w += 4) {
      for (size_t i = 4; i-- > 0;) {
        std::snprintf(buf, sizeof buf, "%02X", bytes[w + i]);
        out += buf;
      }
    }
  };
  if (address.is_v4()) {
    const auto b = address.to_v4().to_bytes();
    words(b.data(), b.size());
  } else {
    const auto b = address.to_v6().to_bytes();
    words(b.data(), b.size());
  }
  std::snprintf(buf, sizeof buf, ":%04X", port);
  return out + buf;
}

// The inode of the socket whose local end is `local` and remote end `remote`, from one table.
std::optional<std::string> socket_inode(const char* table, const std::string& local, const std::string& remote) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, l, r, state, queues, timer, retransmits, uid, timeout, inode;
    if (!(fields >> slot >> l >> r >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode)) continue;
    if (l == local && r == remote) return inode;
  }
  return std::nullopt;
}

const char* op_name(QueryType type) {
  switch (type) {
    case QueryType::set: return "set";
    case QueryType::compare_set: return "compare_set";
    case QueryType::get: return "get";
    case QueryType::add: return "add";
    case QueryType::check: return "check";
    case QueryType::wait: return "wait";
    case QueryType::get_num_keys: return "get_num_keys";
    case QueryType::watch_key: return "watch_key";
    case QueryType::delete_key: return "delete_key";
  }
  return "unknown";
}

}  // namespace

std::optional<int64_t> local_peer_pid(const boost::asio::ip::tcp::endpoint& client, const boost::asio::ip::tcp::endpoint& server) {
  // The client's socket, seen from its own side: local = the client, remote = the store.
  std::optional<std::string> inode;
  if (client.address().is_v4()) {
    inode = socket_inode("/proc/net/tcp", proc_form(client.address(), client.port()), proc_form(server.address(), server.port()));
    if (!inode) {
      // A v4 client of a dual-stack listener shows as v4-mapped v6.
      const auto mapped = boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, client.address().to_v4());
      const auto server6 = server.address().is_v4()
                               ? boost::asio::ip::address(boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, server.address().to_v4()))
                               : server.address();
      inode = socket_inode("/proc/net/tcp6", proc_form(mapped, client.port()), proc_form(server6, server.port()));
    }
  } else {
    inode = socket_inode("/proc/net/tcp6", proc_form(client.address(), client.port()), proc_form(server.address(), server.port()));
  }
  if (!inode || *inode == "0") return std::nullopt;
  const std::string target = "socket:[" + *inode + "]";
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator proc("/proc", ec), end; !ec && proc != end; proc.increment(ec)) {
    const std::string name = proc->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code fd_ec;
    for (fs::directory_iterator fd(proc->path() / "fd", fd_ec), fd_end; !fd_ec && fd != fd_end; fd.increment(fd_ec)) {
      std::error_code link_ec;
      const fs::path link = fs::read_symlink(fd->path(), link_ec);
      if (!link_ec && link.native() == target) return std::stoll(name);
    }
  }
  return std::nullopt;
}

StoreRecorder::StoreRecorder(const std::string& path) : path_(path), out_(path, std::ios::out | std::ios::trunc) {
  if (!out_) throw errors::invalid_argument("cannot write the store's record " + path);
  write(nlohmann::json{{"op", "start"}, {"t", wall_ns()}, {"pid", static_cast<int64_t>(getpid())}}.dump());
}

StoreRecorder::~StoreRecorder() = default;

void StoreRecorder::write(const std::string& line) {
  if (!error_.empty()) return;
  out_ << line << '\n';
  if (!out_) error_ = "cannot write the store's record " + path_;
}

void StoreRecorder::connected(uint64_t conn, const std::string& peer, std::optional<int64_t> pid) {
  write(nlohmann::json{{"op", "connect"}, {"t", wall_ns()}, {"conn", conn}, {"peer", peer},
                       {"pid", pid ? nlohmann::json(*pid) : nlohmann::json()}}
            .dump());
}

void StoreRecorder::closed(uint64_t conn) {
  write(nlohmann::json{{"op", "close"}, {"t", wall_ns()}, {"conn", conn}}.dump());
  out_.flush();  // a connection's end is a natural point to make the record durable
}

StoreRecorder::Pending StoreRecorder::begin(uint64_t conn, const Query& q, const store::KeyValueTable& table) const {
  Pending p{conn, wall_ns(), q, std::nullopt};
  if (q.type == QueryType::compare_set || q.type == QueryType::delete_key) p.before = table.get(q.keys[0]);
  return p;
}

void StoreRecorder::end(const Pending& p, const store::KeyValueTable& table) {
  const Query& q = p.query;
  nlohmann::json line = {{"op", op_name(q.type)}, {"t", p.t}, {"conn", p.conn}};
  switch (q.type) {
    case QueryType::set:
      line["key"] = q.keys[0];
      line["value"] = hex_of(q.values[0]);
      break;
    case QueryType::compare_set: {
      line["key"] = q.keys[0];
      line["expected"] = hex_of(q.values[0]);
      line["desired"] = hex_of(q.values[1]);
      const std::optional<Bytes> after = table.get(q.keys[0]);
      // PyTorch's rule (key_value_table.h): the key is set when it holds `expected`, or is absent
      // and `expected` is empty. Rewriting the same bytes is a write too.
      line["written"] = p.before ? *p.before == q.values[0] : q.values[0].empty();
      line["value"] = hex_or_null(after);
      break;
    }
    case QueryType::get:
      line["key"] = q.keys[0];
      line["value"] = hex_or_null(table.get(q.keys[0]));
      break;
    case QueryType::add:
      line["key"] = q.keys[0];
      line["delta"] = q.delta;
      line["value"] = hex_or_null(table.get(q.keys[0]));
      break;
    case QueryType::delete_key:
      line["key"] = q.keys[0];
      line["deleted"] = p.before.has_value() && !table.get(q.keys[0]).has_value();
      break;
    case QueryType::check:
    case QueryType::wait:
    case QueryType::watch_key:
    case QueryType::get_num_keys:
      line["keys"] = q.keys;
      break;
  }
  write(line.dump());
}

void StoreRecorder::stop() {
  write(nlohmann::json{{"op", "stop"}, {"t", wall_ns()}}.dump());
  out_.flush();
  if (!out_ && error_.empty()) error_ = "cannot write the store's record " + path_;
}

}  // namespace dagsim::net::tcpstore
