// StoreRecorder (store_recorder.h).
#include "net/tcpstore/store_recorder.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "net/crypto.h"

namespace dagsim::net::tcpstore {

namespace {

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Room kept at the cap for the closing line (cut or stop: under 100 bytes).
constexpr uint64_t kClosingRoom = 256;

bool is_state_key(const std::string& key) {
  const std::string_view k = key.starts_with('/') ? std::string_view(key).substr(1) : std::string_view(key);
  return key.size() <= kRecordKeyMax && k.starts_with(kRecordStatePrefix);
}

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

nlohmann::json recorded_value(std::span<const uint8_t> value, size_t whole_max) {
  if (value.size() <= whole_max) return hex_of(value);
  return {{"bytes", value.size()}, {"sha256", sha256_hex(value)}};
}

nlohmann::json recorded_key(const std::string& key) {
  if (key.size() <= kRecordKeyMax) {
    nlohmann::json text = key;
    try {
      (void)text.dump();  // JSON's strings are UTF-8: anything else does not dump
      return text;
    } catch (const nlohmann::json::type_error&) {
    }
  }
  return recorded_value(std::span(reinterpret_cast<const uint8_t*>(key.data()), key.size()), 0);
}

namespace {

// The client socket's inode in the TCP tables under `net` (/proc/net, or /proc/PID/net for the
// namespace of PID), or nullopt.
std::optional<std::string> client_inode(const std::string& net, const boost::asio::ip::tcp::endpoint& client,
                                        const boost::asio::ip::tcp::endpoint& server) {
  // The client's socket, seen from its own side: local = the client, remote = the store.
  const std::string tcp = net + "/tcp";
  const std::string tcp6 = net + "/tcp6";
  std::optional<std::string> inode;
  if (client.address().is_v4()) {
    inode = socket_inode(tcp.c_str(), proc_form(client.address(), client.port()), proc_form(server.address(), server.port()));
    if (!inode) {
      // A v4 client of a dual-stack listener shows as v4-mapped v6.
      const auto mapped = boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, client.address().to_v4());
      const auto server6 = server.address().is_v4()
                               ? boost::asio::ip::address(boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, server.address().to_v4()))
                               : server.address();
      inode = socket_inode(tcp6.c_str(), proc_form(mapped, client.port()), proc_form(server6, server.port()));
    }
  } else {
    inode = socket_inode(tcp6.c_str(), proc_form(client.address(), client.port()), proc_form(server.address(), server.port()));
  }
  if (inode && *inode == "0") return std::nullopt;
  return inode;
}

bool all_digits(const std::string& name) { return !name.empty() && name.find_first_not_of("0123456789") == std::string::npos; }

}  // namespace

std::optional<int64_t> local_peer_pid(const boost::asio::ip::tcp::endpoint& client, const boost::asio::ip::tcp::endpoint& server) {
  namespace fs = std::filesystem;
  std::optional<std::string> inode = client_inode("/proc/net", client, server);
  if (!inode) {
    // A client in another network namespace of this host (each agent of a job in its own, over a
    // bridge without NAT, so both ends read the same there): its socket is in that namespace's
    // tables, read through any process in it. Socket inodes are numbered host-wide, so the
    // descriptor search below finds its process wherever it runs.
    std::error_code ec;
    std::string own_ns;
    {
      std::error_code link_ec;
      own_ns = fs::read_symlink("/proc/self/ns/net", link_ec).native();
    }
    std::vector<std::string> seen = {own_ns};
    for (fs::directory_iterator proc("/proc", ec), end; !ec && proc != end && !inode; proc.increment(ec)) {
      const std::string name = proc->path().filename().string();
      if (!all_digits(name)) continue;
      std::error_code link_ec;
      const std::string ns = fs::read_symlink(proc->path() / "ns" / "net", link_ec).native();
      if (link_ec || std::find(seen.begin(), seen.end(), ns) != seen.end()) continue;
      seen.push_back(ns);
      inode = client_inode((proc->path() / "net").native(), client, server);
    }
  }
  if (!inode) return std::nullopt;
  const std::string target = "socket:[" + *inode + "]";
  std::error_code ec;
  for (fs::directory_iterator proc("/proc", ec), end; !ec && proc != end; proc.increment(ec)) {
    const std::string name = proc->path().filename().string();
    if (!all_digits(name)) continue;
    std::error_code fd_ec;
    for (fs::directory_iterator fd(proc->path() / "fd", fd_ec), fd_end; !fd_ec && fd != fd_end; fd.increment(fd_ec)) {
      std::error_code link_ec;
      const fs::path link = fs::read_symlink(fd->path(), link_ec);
      if (!link_ec && link.native() == target) return std::stoll(name);
    }
  }
  return std::nullopt;
}

StoreRecorder::StoreRecorder(const std::string& path, RecorderLimits limits, std::function<void(const std::string&)> log)
    : path_(path), limits_(limits), log_(std::move(log)) {
  if (limits_.max_bytes < kRecordMinBytes) {
    throw errors::invalid_argument("a record cap of " + std::to_string(limits_.max_bytes) + " bytes (--record-max-bytes) is below the " +
                                   std::to_string(kRecordMinBytes) + " a record needs");
  }
  if (limits_.value_bytes > kRecordStateMax) {
    throw errors::invalid_argument("values of up to " + std::to_string(limits_.value_bytes) +
                                   " bytes recorded whole (--record-value-bytes): more than the most, " +
                                   std::to_string(kRecordStateMax));
  }
  out_.open(path, std::ios::out | std::ios::trunc);
  if (!out_) throw errors::invalid_argument("cannot write the store's record " + printable(path, kPathMax));
  write(nlohmann::json{{"op", "start"}, {"t", wall_ns()}, {"pid", static_cast<int64_t>(getpid())}});
}

StoreRecorder::~StoreRecorder() = default;

void StoreRecorder::write(const nlohmann::json& line, bool closing) {
  if (!error_.empty() || cut_) return;
  // Keys are UTF-8 by now (recorded_key); `replace` only keeps a surprise from throwing here.
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
  if (!closing && written_ + text.size() + kClosingRoom > limits_.max_bytes) {
    // The cap: this line and every later one are left out, and the record says where it ends.
    const int64_t t = line.contains("t") ? line.at("t").get<int64_t>() : wall_ns();
    write(nlohmann::json{{"op", "cut"}, {"t", t}, {"max_bytes", limits_.max_bytes}}, true);
    out_.flush();
    cut_ = true;
    if (log_) {
      log_("the record " + printable(path_, kPathMax) + " reached its cap of " + std::to_string(limits_.max_bytes) +
           " bytes (--record-max-bytes): recording stopped, the store serves on");
    }
    return;
  }
  out_ << text;
  written_ += text.size();
  if (!out_) error_ = "cannot write the store's record " + printable(path_, kPathMax);
}

void StoreRecorder::connected(uint64_t conn, const std::string& peer, std::optional<int64_t> pid) {
  write(nlohmann::json{{"op", "connect"}, {"t", wall_ns()}, {"conn", conn}, {"peer", peer},
                       {"pid", pid ? nlohmann::json(*pid) : nlohmann::json()}});
}

void StoreRecorder::closed(uint64_t conn) {
  write(nlohmann::json{{"op", "close"}, {"t", wall_ns()}, {"conn", conn}});
  out_.flush();  // a connection's end is a natural point to make the record durable
}

StoreRecorder::Pending StoreRecorder::begin(uint64_t conn, const Query& q, const store::KeyValueTable& table) const {
  Pending p{conn, wall_ns(), q, std::nullopt};
  if (q.type == QueryType::compare_set || q.type == QueryType::delete_key) p.before = table.get(q.keys[0]);
  return p;
}

void StoreRecorder::end(const Pending& p, const store::KeyValueTable& table) {
  if (cut_ || !error_.empty()) return;  // nothing more is written: spare the hex and digests
  const Query& q = p.query;
  nlohmann::json line = {{"op", op_name(q.type)}, {"t", p.t}, {"conn", p.conn}};
  // What the store answered is summarised past the limit; what a client wrote to a state key is
  // kept whole for the judge (the client sent every byte of it).
  const size_t answered = limits_.value_bytes;
  const size_t sent = !q.keys.empty() && is_state_key(q.keys[0]) ? std::max(kRecordStateMax, answered) : answered;
  switch (q.type) {
    case QueryType::set:
      line["key"] = recorded_key(q.keys[0]);
      line["value"] = recorded_value(q.values[0], sent);
      break;
    case QueryType::compare_set: {
      line["key"] = recorded_key(q.keys[0]);
      line["expected"] = recorded_value(q.values[0], sent);
      line["desired"] = recorded_value(q.values[1], sent);
      // PyTorch's rule (key_value_table.h): the key is set when it holds `expected`, or is absent
      // and `expected` is empty. Rewriting the same bytes is a write too.
      const bool written = p.before ? *p.before == q.values[0] : q.values[0].empty();
      line["written"] = written;
      line["value"] = value_now(q.keys[0], table, written ? sent : answered);
      break;
    }
    case QueryType::get:
      line["key"] = recorded_key(q.keys[0]);
      line["value"] = value_now(q.keys[0], table, answered);
      break;
    case QueryType::add:
      line["key"] = recorded_key(q.keys[0]);
      line["delta"] = q.delta;
      line["value"] = value_now(q.keys[0], table, answered);
      break;
    case QueryType::delete_key:
      line["key"] = recorded_key(q.keys[0]);
      line["deleted"] = p.before.has_value() && !table.get(q.keys[0]).has_value();
      break;
    case QueryType::check:
    case QueryType::wait:
    case QueryType::watch_key:
    case QueryType::get_num_keys: {
      nlohmann::json keys = nlohmann::json::array();
      for (const std::string& k : q.keys) keys.push_back(recorded_key(k));
      line["keys"] = std::move(keys);
      break;
    }
  }
  write(line);
  // A write reaches the file in the step that applied it, so a store killed afterwards leaves a
  // record that holds it (`dagsim store --restore` replays it).
  if (q.type == QueryType::set || q.type == QueryType::compare_set || q.type == QueryType::add ||
      q.type == QueryType::delete_key) {
    out_.flush();
  }
}

nlohmann::json StoreRecorder::value_now(const std::string& key, const store::KeyValueTable& table, size_t whole_max) {
  const uint64_t version = table.version_of(key);
  const Bytes* value = version == 0 ? nullptr : table.value_at(key, version);
  if (value == nullptr) return nullptr;
  if (value->size() <= whole_max || key.size() > kRecordKeyMax) return recorded_value(*value, whole_max);
  // A version is one value of the key for good, so its digest is worked out once.
  if (digests_.size() >= kDigestsKept && !digests_.contains(key)) digests_.clear();
  auto& [seen, digest] = digests_[key];
  if (seen != version) {
    digest = sha256_hex(*value);
    seen = version;
  }
  return {{"bytes", value->size()}, {"sha256", digest}};
}

void StoreRecorder::fault(uint64_t conn, std::string_view kind, QueryType type) {
  write(nlohmann::json{{"op", "fault"}, {"t", wall_ns()}, {"conn", conn}, {"fault", std::string(kind)}, {"query", op_name(type)}});
}

void StoreRecorder::stop() {
  write(nlohmann::json{{"op", "stop"}, {"t", wall_ns()}}, true);
  out_.flush();
  if (!out_ && error_.empty()) error_ = "cannot write the store's record " + printable(path_, kPathMax);
}

}  // namespace dagsim::net::tcpstore
