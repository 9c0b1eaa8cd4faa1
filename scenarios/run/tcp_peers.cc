#include "scenarios/run/tcp_peers.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/printable.h"
#include "scenarios/format/scenario_text.h"

namespace dagsim::scenarios {

using nlohmann::json;

namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

std::optional<std::string> host_problem(const std::string& host) {
  if (host.empty()) return "is empty";
  if (host.size() > 253) return "is " + std::to_string(host.size()) + " bytes, longer than any host name (253)";
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1 || ::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return std::nullopt;
  // Not an address: a DNS name, labels of letters, digits and '-'. One of digits and dots only is
  // an IPv4 address written wrong (999.1.1.1), which a resolver would otherwise look up as a name.
  if (host.find_first_not_of("0123456789.") == std::string::npos) return "is not an IPv4 address";
  if (host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != std::string::npos ||
      host.front() == '.' || host.front() == '-' || host.find("..") != std::string::npos) {
    return "is neither an IP address nor a host name";
  }
  return std::nullopt;
}

HostPort parse_host_port(const std::string& text, const std::string& what) {
  const auto bad = [&](const std::string& problem) {
    return errors::invalid_argument(what + " " + printable(text) + ": " + problem);
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) throw bad("expected HOST:PORT");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);  // [::1]:80
  const std::string port = text.substr(colon + 1);
  if (const std::optional<std::string> problem = host_problem(host)) throw bad("the host " + *problem);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) < 1 || std::stoi(port) > 65535) {
    throw bad("the port " + printable(port, 20) + " is not in 1..65535");
  }
  return {host, static_cast<uint16_t>(std::stoi(port))};
}

PeersFile read_peers_file(const std::string& path, const Scenario& scenario) {
  std::string text;
  try {
    text = detail::read_bounded_file(path, kMaxPeersFileBytes, ErrorCode::invalid_argument, "a peers file");
  } catch (const Error& e) {
    throw errors::invalid_argument("--peers " + e.detail());
  }
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) { return errors::invalid_argument("--peers " + printable(path, kPathMax) + ": " + what); };
  if (!j.is_object()) throw bad("not a JSON object");
  PeersFile out;
  // 1 to 16 hex digits after an optional 0x: stoull alone would take "-1" (and wrap it) or " 7".
  const auto cluster_id = j.find("cluster_id");
  std::string id = cluster_id != j.end() && cluster_id->is_string() ? cluster_id->get<std::string>() : "";
  const std::string digits = id.rfind("0x", 0) == 0 || id.rfind("0X", 0) == 0 ? id.substr(2) : id;
  if (digits.empty() || digits.size() > 16 || !std::all_of(digits.begin(), digits.end(), is_hex)) {
    throw bad("cluster_id must be a string of 1 to 16 hex digits (0x optional), not " +
              (cluster_id == j.end() ? std::string("missing") : printable(cluster_id->dump())));
  }
  out.cluster_id = std::stoull(digits, nullptr, 16);
  if (!j.contains("nodes") || !j["nodes"].is_array()) throw bad("nodes must be an array");
  const json& nodes = j["nodes"];
  if (nodes.size() != scenario.cluster.nodes) {
    throw bad("lists " + std::to_string(nodes.size()) + " nodes; the scenario has " + std::to_string(scenario.cluster.nodes));
  }
  std::map<std::pair<std::string, uint16_t>, std::string> taken;  // host and port -> the node there
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& n = nodes[i];
    const std::string at = "nodes[" + std::to_string(i) + "]";
    const std::string expected = scenario.cluster.node_name(static_cast<uint32_t>(i));
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string() || !n.contains("host") || !n["host"].is_string() ||
        !n.contains("port") || !n["port"].is_number_unsigned()) {
      throw bad(at + " must be {\"name\": string, \"host\": string, \"port\": number}");
    }
    const std::string name = n["name"].get<std::string>();
    if (name != expected) {
      throw bad(at + " is " + printable(name) + "; the scenario's node " + std::to_string(i) + " is " + expected);
    }
    const std::string host = n["host"].get<std::string>();
    if (const std::optional<std::string> problem = host_problem(host)) {
      throw bad(expected + ": the host " + (host.empty() ? "" : printable(host) + " ") + *problem);
    }
    const uint64_t port = n["port"].get<uint64_t>();
    if (port == 0 || port > 65535) throw bad(expected + ": port " + std::to_string(port) + " is not in 1..65535");
    const auto [other, fresh] = taken.emplace(std::pair{host, static_cast<uint16_t>(port)}, expected);
    if (!fresh) {
      throw bad(expected + " and " + other->second + " are both at " + printable(host) + ":" + std::to_string(port));
    }
    out.nodes.push_back({expected, host, static_cast<uint16_t>(port)});
  }
  return out;
}

void write_peers_file(const std::string& path, const PeersFile& peers) {
  json nodes = json::array();
  for (const PeerAddress& p : peers.nodes) nodes.push_back({{"name", p.name}, {"host", p.host}, {"port", p.port}});
  char id[19];
  std::snprintf(id, sizeof(id), "0x%016llx", static_cast<unsigned long long>(peers.cluster_id));
  const json j = {{"cluster_id", id}, {"nodes", nodes}};
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(1) << "\n";
  out.close();
  if (!out) throw errors::invalid_argument(path + ": cannot write the peers file");
}

}  // namespace dagsim::scenarios
