// DistributedOptimizer: one optimizer step over parameters that live on several nodes (PyTorch's
// torch.distributed.optim.DistributedOptimizer).
//
// The constructor groups the parameter RRefs by owner and creates a local optimizer on each owner
// over RPC; step(context) asks every owner at once to step its local optimizer with the gradients
// the context accumulated there (distributed autograd's, never .grad), and waits for all of them,
// rethrowing the first error. Each owner runs an OptimizerHost, which serves those calls and
// serialises concurrent steps on that owner (trainers sharing a parameter server), as PyTorch's
// per-worker lock does; steps from different trainers are not ordered across owners.
// Updates are in place: a context whose saved tensors a step changed fails its backward with
// modified_by_inplace, never a silent wrong gradient.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "core/dist_autograd/dist_autograd.h"
#include "core/optim/optimizer.h"
#include "core/rpc/rpc_agent.h"
#include "core/rpc/rref.h"
#include "core/runtime/mutex.h"

namespace dagsim::optim {

struct OptimizerConfig {
  enum class Kind : uint8_t { sgd, adam };
  Kind kind = Kind::sgd;
  SgdOptions sgd;
  AdamOptions adam;
};

// The owner side, one per node that owns parameters: serves dagsim.optim.create,
// dagsim.optim.step, dagsim.optim.drop, dagsim.optim.state and dagsim.optim.load_state on its agent (optimizer ids are the caller's: global ids
// from its agent, passed as exact int64 arguments).
class OptimizerHost {
 public:
  OptimizerHost(rpc::RpcAgent& agent, dist_autograd::DistAutograd& autograd);
  size_t optimizers() const { return optimizers_.size(); }

 private:
  // The optimizer `id`, which only the node that named it (worker_of(id)) may use: a peer cannot
  // step, read, load or drop another trainer's optimizer. Throws invalid_argument naming both.
  Optimizer& owned(const char* function, uint64_t id, WorkerId caller);

  dist_autograd::DistAutograd& autograd_;
  std::map<uint64_t, std::unique_ptr<Optimizer>> optimizers_;
  runtime::Mutex step_lock_;
};

class DistributedOptimizer {
 public:
  DistributedOptimizer(rpc::RpcAgent& agent, OptimizerConfig config, std::vector<rpc::RRef> params);
  // Asks each owner to drop its local optimizer.
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;
  void step(dist_autograd::ContextId context);

  // Every parameter's optimizer state (Optimizer::state), in the constructor's order of
  // parameters, fetched from the owners: what an elastic job checkpoints with the parameters.
  std::vector<std::vector<Tensor>> state_dict();
  // Sets every parameter's optimizer state on its owner, as state_dict() returned it (perhaps from
  // an optimizer whose parameters lived elsewhere). Throws invalid_argument for the wrong number
  // of parameters or a state of the wrong form (the owner's error names the parameter).
  void load_state_dict(const std::vector<std::vector<Tensor>>& state);

 private:
  rpc::RpcAgent& agent_;
  std::vector<rpc::RRef> params_;  // kept: the owners keep the parameters while we may step
  std::map<WorkerId, uint64_t> optimizer_on_;
  std::map<WorkerId, std::vector<size_t>> params_on_;  // indices into params_, in the owner's order
};

}  // namespace dagsim::optim
