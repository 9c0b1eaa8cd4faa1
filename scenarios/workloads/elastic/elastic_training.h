// ElasticTraining: what an elastic job's worker group runs (elastic_spec.h), its checkpoint and
// the local oracle.
//
// The model is an MLP: parameters w1, b1, w2, b2, ... (nn.Linear's layout and init bound
// 1/sqrt(in), seeded), layer i on rank i mod world. Step k trains on a batch seeded by the job's
// seed and k alone: x [batch, input] uniform in [-1, 1), and y [batch, out of the last layer] the
// output of a fixed teacher network for x (one tanh layer of 16 units, seeded by the job's seed
// on its own stream), so there is something to learn and the loss falls as training goes.
// One step: h = mlp_layer(h, w_i, b_i) on each layer's owner by rpc_sync, loss = mse_loss(h, y) on
// rank 0, backward in a distributed autograd context, DistributedOptimizer step.
//
// The checkpoint (one store key per job): the steps committed, the round that committed it, every
// parameter and every parameter's optimizer state, in the wire format's primitives (rpc/wire.h),
// so a corrupt or foreign value is refused by name, never trusted. A step commits when its
// checkpoint is written by compare-and-set on the version its group loaded or last wrote.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/rendezvous/rendezvous_handler.h"
#include "core/rpc/rpc_agent.h"
#include "core/rpc/wire.h"
#include "core/store/store.h"
#include "scenarios/workloads/elastic/elastic_spec.h"

namespace dagsim::scenarios {

inline constexpr uint32_t kCheckpointFormat = 1;

struct Checkpoint {
  static constexpr const char* kName = "elastic checkpoint";
  uint32_t format = kCheckpointFormat;
  uint64_t step = 0;   // steps committed
  uint64_t round = 0;  // the rendezvous round whose group committed it
  std::vector<Tensor> params;
  std::vector<std::vector<Tensor>> optimizer;  // each parameter's Optimizer::state

  template <class Io, class Self>
  static void fields(Io& io, Self& m) {
    io.num("checkpoint.format", m.format);
    io.num("checkpoint.step", m.step);
    io.num("checkpoint.round", m.round);
    io.list("checkpoint.params", m.params, 1024, [&](auto& t) { io.tensor("checkpoint.param", t); });
    io.list("checkpoint.optimizer", m.optimizer, 1024, [&](auto& state) {
      io.list("checkpoint.optimizer.state", state, 3, [&](auto& t) { io.tensor("checkpoint.optimizer.tensor", t); });
    });
  }
};

// The store key of the job's checkpoint.
std::string checkpoint_key(const ElasticSpec& spec);
rpc::Bytes encode_checkpoint(const Checkpoint& checkpoint);
// Throws checkpoint_invalid naming what is wrong: bytes that are not a checkpoint, another format,
// or parameters that are not this model's.
Checkpoint decode_checkpoint(const rpc::Bytes& bytes, const ElasticSpec& spec);

class ElasticModel {
 public:
  ElasticModel(const ElasticSpec& spec, uint64_t seed);

  const ElasticSpec& spec() const { return spec_; }
  size_t num_params() const { return 2 * spec_.layers.size(); }
  // "w1", "b1", ...
  std::string param_name(size_t i) const;
  std::vector<Tensor> initial_params() const;
  // Step `step`'s batch: x, and the teacher's y for it.
  std::pair<Tensor, Tensor> batch(uint64_t step) const;
  // The rank that owns parameter i in a world of `world`.
  uint32_t owner_rank(size_t param, uint32_t world) const { return static_cast<uint32_t>((param / 2) % world); }
  // The oracle: `steps` steps on the local engine with the local optimizer; the parameters after,
  // and with `losses` each step's loss (before its update), as a rank 0 reports it.
  std::vector<Tensor> train_locally(uint64_t steps, std::vector<double>* losses = nullptr) const;

 private:
  // The teacher's y for x (rows of spec.input values, row-major), rows of the last layer's width.
  std::vector<double> teach(const std::vector<double>& x) const;

  // The teacher: y = w2 tanh(w1 x + b1) + b2, row-major, drawn once from the seed.
  struct Teacher {
    std::vector<double> w1, b1, w2, b2;
  };
  const ElasticSpec& spec_;
  uint64_t seed_;
  Teacher teacher_;
};

// What a worker group's rank 0 reports as it goes (for the records).
struct TrainingListener {
  std::function<void(uint64_t start_step)> started;  // the checkpoint it loaded
  // Each commit the store acknowledged: the checkpoint as written, its version, the step's loss.
  std::function<void(const Checkpoint& checkpoint, uint64_t version, double loss)> committed;
  std::function<void()> backward;  // as each step's backward pass begins
};

// One node's worker of one round. Rank 0 drives the round's training from the last committed
// checkpoint to `steps`; every other rank serves the calls (its node's agent does) and waits for
// the checkpoint of the last step. `members` names the round's nodes by rank. `store_restarted`:
// the store has restarted since the job began, so an absent checkpoint was lost (never a fresh
// start, which would apply steps twice). Throws on failure (the agent restarts the group).
struct WorkerServices {
  rpc::RpcAgent& agent;
  dist_autograd::DistAutograd& autograd;
  store::Store& store;
};
void run_elastic_worker(const ElasticModel& model, const rendezvous::RendezvousInfo& info, const std::vector<WorkerId>& members,
                        bool store_restarted, WorkerServices services, const TrainingListener& listener);

}  // namespace dagsim::scenarios
