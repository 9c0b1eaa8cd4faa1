#include "scenarios/run/tcp_peers.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/base/error.h"

namespace dagsim::scenarios {

using nlohmann::json;

PeersFile read_peers_file(const std::string& path, const Scenario& scenario) {
  std::ifstream in(path);
  if (!in) throw errors::invalid_argument("--peers " + path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) { return errors::invalid_argument("--peers " + path + ": " + what); };
  if (!j.is_object()) throw bad("not a JSON object");
  PeersFile out;
  if (!j.contains("cluster_id") || !j["cluster_id"].is_string()) throw bad("cluster_id must be a string of hex digits");
  try {
    size_t used = 0;
    const std::string id = j["cluster_id"].get<std::string>();
    out.cluster_id = std::stoull(id, &used, 16);
    if (used != id.size()) throw std::invalid_argument(id);
  } catch (const std::exception&) {
    throw bad("cluster_id must be a string of hex digits");
  }
  if (!j.contains("nodes") || !j["nodes"].is_array()) throw bad("nodes must be an array");
  const json& nodes = j["nodes"];
  if (nodes.size() != scenario.cluster.nodes) {
    throw bad("lists " + std::to_string(nodes.size()) + " nodes; the scenario has " + std::to_string(scenario.cluster.nodes));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& n = nodes[i];
    const std::string expected = scenario.cluster.node_name(static_cast<uint32_t>(i));
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string() || !n.contains("host") || !n["host"].is_string() ||
        !n.contains("port") || !n["port"].is_number_unsigned()) {
      throw bad("nodes[" + std::to_string(i) + "] must be {\"name\": string, \"host\": string, \"port\": number}");
    }
    if (n["name"].get<std::string>() != expected) {
      throw bad("nodes[" + std::to_string(i) + "] is " + n["name"].get<std::string>() + "; the scenario's node " +
                std::to_string(i) + " is " + expected);
    }
    const uint64_t port = n["port"].get<uint64_t>();
    if (port == 0 || port > 65535) throw bad(expected + ": port " + std::to_string(port) + " is not in 1..65535");
    out.nodes.push_back({expected, n["host"].get<std::string>(), static_cast<uint16_t>(port)});
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
