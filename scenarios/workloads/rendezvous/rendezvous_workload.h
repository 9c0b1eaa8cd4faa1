// RendezvousWorkload: elastic dynamic rendezvous as a scenario (issue 11): one node hosts the
// built-in store, every other node runs a small elastic agent around a RendezvousHandler
// (rendezvous_spec.h says what an agent does and when).
//
// Records, for the judge (rendezvous_judge.h), all on the scenario's clock:
//  - the store node's incarnations: "history", every committed write of the state key
//    ({"t", "v": version, "s": the encoded state in hex, or null when deleted}), taken from the
//    store's write observer, so it is the store's own order of commits;
//  - each participant incarnation: "node" ([addr, pid, local_id]), "events" (each agent call:
//    {"op", "start", "t", then round/rank/world/version, waiting, ok, or error/message}) and
//    "writes" (each compare-and-set it sent on the state key: recording_store.h).
// A participant still running at the end has finished its last call (the run ends when every
// agent has), so an unfinished call in a record means its incarnation died in it.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "core/rendezvous/rendezvous_handler.h"
#include "core/rpc/rpc_agent.h"
#include "core/store/store_client.h"
#include "core/store/store_service.h"
#include "scenarios/workloads/registry.h"
#include "scenarios/workloads/rendezvous/recording_store.h"
#include "scenarios/workloads/rendezvous/rendezvous_spec.h"

namespace dagsim::scenarios {

extern const WorkloadType kRendezvousWorkload;

// Reads a rendezvous table at key path `path` (the rendezvous workload's [rendezvous], the elastic
// workload's [elastic.rendezvous]), failing through `reader` with the file, line and key. For an
// elastic job the keys of the job's end (duration_ms), the etcd backend and close actions are
// refused: training ends the job and the agents close the rendezvous.
enum class RendezvousTableUse : uint8_t { rendezvous, elastic };
RendezvousSpec read_rendezvous_table(const detail::TomlReader& reader, const toml::node& node, const std::string& path,
                                     const Scenario& scenario, RendezvousTableUse use);

// Reports the round of a rendezvous state the store just took (WorkloadEvent::store_round), where
// a fault waits for it; a deletion or bytes that are no state report nothing.
void report_store_round(NodeContext& node, const store::Versioned& state);

class RendezvousWorkload final : public Workload {
 public:
  explicit RendezvousWorkload(const Scenario& scenario);
  ~RendezvousWorkload() override;

  void node_main(NodeContext& node) override;
  std::optional<runtime::TimePoint> end_time() const override { return std::nullopt; }
  runtime::Duration drain_time() const override { return runtime::Duration{0}; }
  void release_nodes() override;

 private:
  // One incarnation's objects, kept until the run's nodes have stopped.
  struct Life {
    std::unique_ptr<rpc::RpcAgent> agent;
    std::unique_ptr<store::StoreService> service;
    std::unique_ptr<store::Store> client;  // the built-in store's StoreClient, or an etcd client
    std::unique_ptr<RecordingStore> recording;
    std::unique_ptr<rendezvous::RendezvousHandler> handler;
  };
  void run_store(NodeContext& node, Life& life);
  // backend = "etcd": where etcd is and the run's key prefix, served by the store node.
  void serve_etcd(NodeContext& node, Life& life);
  std::unique_ptr<store::Store> connect_etcd(NodeContext& node, Life& life);
  void run_agent(NodeContext& node, Life& life);

  const Scenario& scenario_;
  const RendezvousSpec& spec_;
  rpc::FunctionRegistry registry_;
  // By node, then incarnation; a deque, so a restart never moves an earlier life its fibers use.
  std::vector<std::deque<Life>> lives_;
};

}  // namespace dagsim::scenarios
