// A job's etcd (rdzv_backend = "etcd", job_runner.h): the run starts Debian's etcd-server
// (/usr/bin/etcd) on free ports with its data dir in the run's folder (store/etcd.data, removed
// when the run stops etcd at its end; its log store/etcd.log), and, since etcd keeps no record of its clients' operations, writes the store's
// record itself from etcd's revision history: every revision of every key under the rendezvous
// prefix (net/rdzv: "/torch/elastic/dagsim/") is read (a range at that revision) and written to
// store/store.jsonl as a `set` (or `delete_key`) line in store_recorder.h's format, so
// judge_store_records judges the state's history as it judges a TCPStore's record. torchrun's
// agents run its etcd-v2 backend (python-etcd, etcd's v2 API, which the run's etcd serves:
// --enable-v2): their state key "/torch/elastic/rendezvous/<run_id>" holds what the c10d key
// holds (base64 of the pickled state), and its v2 event history is written as that key's lines.
//
// What such a record is, and is not (said again in docs/scenarios.md's [job] section):
//  - Times are the runner's observation times: it reads etcd every kPollMs (and before etcd is
//    killed or stopped), so a write's time is at most about that late. The judge's slack (500 ms)
//    covers it.
//  - Every write comes from one connection with no pid ("etcd"): etcd does not say which client
//    wrote a revision, so no write is tied to an agent. The state's own history (S1-S7, S10, L1,
//    L2, L5, L6) is judged; what needs each agent's compare-and-set (a write based on a stale read)
//    is not.
//  - While a store_pause holds etcd stopped nothing is read (nothing can be written either); a
//    store_restart with keep_data = false wipes the data dir, and the revisions start again.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/base/error.h"
#include "net/etcd/etcd_codec.h"
#include "scenarios/job/job_proc.h"
#include "scenarios/job/job_runner.h"

namespace dagsim::scenarios::job {

namespace fs = std::filesystem;

namespace {

constexpr const char* kEtcdBinary = "/usr/bin/etcd";
// The prefix dagsim's etcd rendezvous keeps its keys under (net/rdzv/rendezvous_registry.cc).
constexpr const char* kEtcdPrefix = "/torch/elastic/dagsim/";
constexpr double kPollMs = 50;

int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A free TCP port on the loopback (the kernel's choice, released at once).
uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw errors::invalid_argument(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw errors::invalid_argument(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

struct HttpReply {
  int status = 0;
  std::string body;
};

// One HTTP/1.0 request to 127.0.0.1:port, answered within timeout_ms, or nullopt (refused, no answer).
std::optional<HttpReply> request(const std::string& method, uint16_t port, const std::string& path, const std::string& body,
                                 int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const auto left = [&] {
    return static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count()));
  };
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) return std::nullopt;
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, left()) != 1) return std::nullopt;
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return std::nullopt;
  const std::string text = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t sent = 0;
  while (sent < text.size()) {
    p = {fd, POLLOUT, 0};
    if (::poll(&p, 1, left()) != 1) return std::nullopt;
    const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) return std::nullopt;
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string reply;
  char chunk[16384];
  for (;;) {
    p = {fd, POLLIN, 0};
    if (::poll(&p, 1, left()) != 1) return std::nullopt;
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return std::nullopt;
    }
    reply.append(chunk, static_cast<size_t>(n));
    if (reply.size() > (size_t{64} << 20)) return std::nullopt;
  }
  const size_t head_end = reply.find("\r\n\r\n");
  const size_t space = reply.find(' ');
  if (head_end == std::string::npos || space == std::string::npos) return std::nullopt;
  HttpReply out;
  try {
    out.status = std::stoi(reply.substr(space + 1, 3));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  out.body = reply.substr(head_end + 4);
  return out;
}

std::optional<HttpReply> post(uint16_t port, const std::string& path, const std::string& body, int timeout_ms) {
  return request("POST", port, path, body, timeout_ms);
}

// etcd's JSON gateway writes int64 fields as strings.
uint64_t number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0;
  const nlohmann::json& v = j.at(key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) return std::stoull(v.get<std::string>());
  return 0;
}

std::string hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    out += kDigits[u >> 4];
    out += kDigits[u & 15];
  }
  return out;
}

nlohmann::json prefix_range(uint64_t revision) {
  nlohmann::json r = {{"key", net::etcd::base64_encode(std::string(kEtcdPrefix))},
                      {"range_end", net::etcd::base64_encode(net::etcd::prefix_end(kEtcdPrefix))}};
  if (revision != 0) r["revision"] = std::to_string(revision);
  return r;
}

}  // namespace

std::optional<std::string> etcd_unavailable() {
  if (::access(kEtcdBinary, X_OK) != 0) return std::string(kEtcdBinary) + " is not installed (Debian's etcd-server: scripts/deps.sh test)";
  return std::nullopt;
}

bool JobRunner::store_paused() const {
  for (const FaultState& f : faults_) {
    if (f.struck && !f.done && f.spec->kind == JobFault::Kind::store_pause) return true;
  }
  return false;
}

void JobRunner::etcd_line(nlohmann::json line) {
  line["t"] = unix_ns();
  // Keys first as the recorder writes them ("op", "t", ...): the order is cosmetic.
  *etcd_record_ << line.dump() << "\n";
  etcd_record_->flush();
}

void JobRunner::start_etcd() {
  if (const auto why = etcd_unavailable()) throw errors::invalid_argument("rdzv_backend = \"etcd\": " + *why);
  const std::string data = dir_ + "/store/etcd.data";
  const bool first = store_incarnation_ == 0;
  // Loopback, for the runner's own reads (post, request), and with namespaces the bridge's address
  // for the agents: never every address of the host.
  const std::vector<std::string> listen = netns_ ? std::vector<std::string>{"127.0.0.1", netns_->store_address()}
                                                 : std::vector<std::string>{"127.0.0.1"};
  const std::string advertise = netns_ ? netns_->store_address() : "127.0.0.1";
  for (int attempt = 0;; ++attempt) {
    if (first || store_port_ == 0) {
      store_port_ = free_port();
      do {
        etcd_peer_port_ = free_port();
      } while (etcd_peer_port_ == store_port_);
    }
    const std::string client = std::to_string(store_port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(etcd_peer_port_);
    net::ProcessSpec spec;
    spec.argv = {kEtcdBinary,
                 "--name=job",
                 "--data-dir=" + data,
                 "--listen-client-urls=" + [&] {
                   std::string urls;
                   for (const std::string& a : listen) urls += (urls.empty() ? "http://" : ",http://") + a + ":" + client;
                   return urls;
                 }(),
                 "--advertise-client-urls=http://" + advertise + ":" + client,
                 "--listen-peer-urls=" + peer_url,
                 "--initial-advertise-peer-urls=" + peer_url,
                 "--initial-cluster=job=" + peer_url,
                 "--initial-cluster-state=new",
                 // torchrun's etcd-v2 backend (python-etcd) speaks the v2 API.
                 "--enable-v2=true"};
    spec.env = base_env();
    spec.fds = {};
    spec.stdout_path = dir_ + "/store/etcd.log";
    spec.stderr_path = spec.stdout_path;
    spec.name = "etcd";
    store_ = net::spawn(spec);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool ready = false;
    while (!ready && !store_.poll() && std::chrono::steady_clock::now() < until) {
      const std::optional<HttpReply> r = post(store_port_, "/v3/kv/range", prefix_range(0).dump(), 500);
      ready = r && r->status == 200;
      if (!ready) sleep_ms(20);
    }
    if (ready) break;
    if (store_.running()) {
      store_.kill();
      store_.wait();
    }
    // A port taken between the choice and etcd's bind (first start: fresh ports), or etcd not yet
    // letting go of its ports or data (a restart): tried three times.
    if (attempt == 2) throw errors::invalid_argument("etcd (" + std::string(kEtcdBinary) + ") did not get ready: see " + spec.stdout_path);
    sleep_ms(200);
  }
  if (first) {
    const std::string record = dir_ + "/store/store.jsonl";
    etcd_record_ = std::make_unique<std::ofstream>(record, std::ios::binary | std::ios::trunc);
    if (!*etcd_record_) throw errors::invalid_argument(record + ": cannot be written");
    etcd_line({{"op", "start"}, {"pid", store_.pid()}});
    // etcd names no client: every write is this one connection's.
    etcd_line({{"op", "connect"}, {"conn", 1}, {"peer", "etcd"}, {"pid", nullptr}});
    store_records_.push_back(record);
    store_tail_ = std::make_unique<StoreTail>(record, "job");
  }
  ++store_incarnation_;
  last_etcd_poll_ms_ = -1e9;
}

void JobRunner::poll_etcd(bool now) {
  if (!etcd_record_ || !store_.running() || store_paused()) return;
  if (!now && now_ms() - last_etcd_poll_ms_ < kPollMs) return;
  last_etcd_poll_ms_ = now_ms();
  if (spec_.launcher == JobLauncher::torchrun) return poll_etcd_v2();
  try {
    std::optional<HttpReply> r = post(store_port_, "/v3/kv/range", nlohmann::json({{"key", net::etcd::base64_encode(std::string(kEtcdPrefix))},
                                                                                   {"count_only", true}}).dump(), 1000);
    if (!r || r->status != 200) return;
    const uint64_t head = number(nlohmann::json::parse(r->body).value("header", nlohmann::json::object()), "revision");
    const std::string prefix = kEtcdPrefix;
    for (uint64_t rev = etcd_revision_ + 1; rev <= head; ++rev) {
      r = post(store_port_, "/v3/kv/range", prefix_range(rev).dump(), 1000);
      if (!r) return;  // no answer now: the next poll reads on from here
      if (r->status != 200) {
        if (r->body.find("compacted") == std::string::npos) return;
        etcd_revision_ = rev;  // gone from etcd's history: nothing to read
        continue;
      }
      const nlohmann::json reply = nlohmann::json::parse(r->body);
      std::map<std::string, std::string> keys;
      for (const nlohmann::json& kv : reply.value("kvs", nlohmann::json::array())) {
        const std::string key = net::etcd::base64_decode(kv.value("key", std::string()));
        if (!key.starts_with(prefix)) continue;
        const std::string name = key.substr(prefix.size());
        const std::string value = net::etcd::base64_decode(kv.value("value", std::string()));
        keys[name] = value;
        if (number(kv, "mod_revision") == rev) {
          etcd_line({{"op", "set"}, {"conn", 1}, {"key", name}, {"value", hex(value)}, {"etcd_revision", rev}});
        }
      }
      for (const auto& [name, value] : etcd_keys_) {
        if (!keys.contains(name)) etcd_line({{"op", "delete_key"}, {"conn", 1}, {"key", name}, {"deleted", true}, {"etcd_revision", rev}});
      }
      etcd_keys_ = std::move(keys);
      etcd_revision_ = rev;
    }
  } catch (const std::exception&) {
    // A reply that is not etcd's (or a value not base64): the next poll tries again.
  }
}

// torchrun's etcd-v2 backend keeps its state (base64 of the pickle, as on c10d) in one v2 key,
// "/torch/elastic/rendezvous/<run_id>": its history is etcd's v2 event history (the last 1000
// events), read with wait=true from the last index read + 1 (answered at once while events are
// there). Written as the c10d state key's lines, so the judge reads it as PyTorch's state.
void JobRunner::poll_etcd_v2() {
  const std::string path = "/v2/keys/torch/elastic/rendezvous/job";
  const std::string state_key = "torch.rendezvous.job";
  try {
    std::optional<HttpReply> r = request("GET", store_port_, path, "", 1000);
    if (!r || r->status != 200) return;  // absent yet (404), or no answer now
    const nlohmann::json now = nlohmann::json::parse(r->body);
    const uint64_t head = number(now.value("node", nlohmann::json::object()), "modifiedIndex");
    for (int guard = 0; etcd_revision_ < head && guard < 1000; ++guard) {
      r = request("GET", store_port_, path + "?wait=true&waitIndex=" + std::to_string(etcd_revision_ + 1), "", 500);
      if (!r) return;
      nlohmann::json event = nlohmann::json::parse(r->body);
      if (r->status != 200) {
        // Cleared from the event history (errorCode 401): the key as it is now stands for them.
        event = {{"action", "set"}, {"node", now.at("node")}};
      }
      const nlohmann::json& node = event.at("node");
      const std::string action = event.value("action", std::string());
      const uint64_t index = number(node, "modifiedIndex");
      if (index <= etcd_revision_) return;
      if (action == "delete" || action == "expire" || action == "compareAndDelete") {
        etcd_line({{"op", "delete_key"}, {"conn", 1}, {"key", state_key}, {"deleted", true}, {"etcd_index", index}});
      } else {
        etcd_line({{"op", "set"}, {"conn", 1}, {"key", state_key}, {"value", hex(node.value("value", std::string()))}, {"etcd_index", index}});
      }
      etcd_revision_ = index;
    }
  } catch (const std::exception&) {
    // A reply that is not etcd's: the next poll tries again.
  }
}

void JobRunner::kill_etcd(bool keep_data) {
  poll_etcd(true);
  store_.kill();
  store_.wait();
  if (!keep_data) {
    std::error_code ec;
    fs::remove_all(dir_ + "/store/etcd.data", ec);
    // The new etcd's revisions start again from 1, with no keys.
    etcd_revision_ = 0;
    etcd_keys_.clear();
  }
}

void JobRunner::stop_etcd() {
  if (!store_.running()) return;
  if (store_paused()) store_.signal(SIGCONT);
  poll_etcd(true);
  stop_process(store_, std::chrono::seconds(10));
  if (etcd_record_) etcd_line({{"op", "stop"}});
  // Its write-ahead log alone is a 64 MB preallocated file: what the run needs of the data is in
  // store.jsonl now, so the data dir goes (a sweep of many seeds would keep gigabytes otherwise).
  std::error_code ec;
  fs::remove_all(dir_ + "/store/etcd.data", ec);
}

}  // namespace dagsim::scenarios::job
