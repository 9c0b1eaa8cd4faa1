// The elastic job's training, checkpoint and oracle (elastic_training.h).
#include "scenarios/workloads/elastic/elastic_training.h"

#include <cmath>

#include "core/autograd/engine.h"
#include "core/base/prng.h"
#include "core/optim/distributed_optimizer.h"
#include "core/tensor/ops.h"
#include "compute/kernels/vector_math.h"
#include "scenarios/workloads/program/program.h"

namespace dagsim::scenarios {

namespace {

constexpr uint64_t kParamStream = 0xe1a5'0001;
constexpr uint64_t kBatchStream = 0xe1a5'0002;
constexpr uint64_t kTeacherStream = 0xe1a5'0003;
// The teacher's hidden width and its init gain: twice nn.Linear's bound, so that its tanh units
// bend (a linear teacher would be learnt by the last layer alone) and its targets spread over
// about [-1, 1], as the old noise targets did, while staying a function the student can learn.
constexpr int64_t kTeacherHidden = 16;
constexpr double kTeacherGain = 2.0;

std::vector<double> uniform_values(Prng random, int64_t n, double bound) {
  std::vector<double> values(static_cast<size_t>(n));
  for (double& v : values) v = bound * random.uniform(-1.0, 1.0);
  return values;
}

// One layer of the model on the local engine, by the same function the owners run.
Tensor local_layer(const rpc::FunctionRegistry& registry, const Tensor& h, const Tensor& w, const Tensor& b,
                   Activation activation) {
  rpc::CallContext local{nullptr, 0};
  rpc::CallArgs args;
  args.tensors = {h, w, b};
  args.attributes["activation"] = static_cast<double>(activation);
  return detail::function(registry, "mlp_layer")(local, args).at(0);
}

}  // namespace

std::string checkpoint_key(const ElasticSpec& spec) { return "dagsim/elastic/" + spec.rendezvous.settings.run_id + "/checkpoint"; }

rpc::Bytes encode_checkpoint(const Checkpoint& checkpoint) { return rpc::to_bytes(checkpoint); }

Checkpoint decode_checkpoint(const rpc::Bytes& bytes, const ElasticSpec& spec) {
  Checkpoint c;
  try {
    c = rpc::from_bytes<Checkpoint>(bytes);
  } catch (const Error& e) {
    throw errors::checkpoint_invalid("the value of " + checkpoint_key(spec) + " is no checkpoint: " + e.detail());
  }
  if (c.format != kCheckpointFormat) {
    throw errors::checkpoint_invalid(checkpoint_key(spec) + " has checkpoint format " + std::to_string(c.format) +
                                     "; this build reads " + std::to_string(kCheckpointFormat));
  }
  const size_t n = 2 * spec.layers.size();
  if (c.params.size() != n || c.optimizer.size() != n) {
    throw errors::checkpoint_invalid(checkpoint_key(spec) + " holds " + std::to_string(c.params.size()) + " parameters and " +
                                     std::to_string(c.optimizer.size()) + " optimizer states; this model has " + std::to_string(n));
  }
  for (size_t i = 0; i < n; ++i) {
    const Shape want = i % 2 == 0 ? Shape{spec.layers[i / 2].out, spec.in_of(i / 2)} : Shape{spec.layers[i / 2].out};
    if (c.params[i].shape() != want || c.params[i].dtype() != Dtype::float64) {
      throw errors::checkpoint_invalid(checkpoint_key(spec) + ": parameter " + std::to_string(i) + " has shape " +
                                       shape_str(c.params[i].shape()) + "; this model's is " + shape_str(want));
    }
  }
  if (c.step > spec.steps) {
    throw errors::checkpoint_invalid(checkpoint_key(spec) + " says " + std::to_string(c.step) + " steps committed of " +
                                     std::to_string(spec.steps));
  }
  return c;
}

ElasticModel::ElasticModel(const ElasticSpec& spec, uint64_t seed) : spec_(spec), seed_(seed) {
  DAGSIM_ASSERT(!spec.layers.empty());
  const Prng base = Prng(seed_).fork(kTeacherStream);
  const int64_t in = spec_.input, out = spec_.layers.back().out;
  const double bound1 = kTeacherGain / std::sqrt(static_cast<double>(in));
  const double bound2 = kTeacherGain / std::sqrt(static_cast<double>(kTeacherHidden));
  teacher_.w1 = uniform_values(base.fork(0), kTeacherHidden * in, bound1);
  teacher_.b1 = uniform_values(base.fork(1), kTeacherHidden, bound1);
  teacher_.w2 = uniform_values(base.fork(2), out * kTeacherHidden, bound2);
  teacher_.b2 = uniform_values(base.fork(3), out, bound2);
}

std::vector<double> ElasticModel::teach(const std::vector<double>& x) const {
  const size_t in = spec_.input, out = spec_.layers.back().out, hidden = kTeacherHidden;
  DAGSIM_ASSERT(x.size() % in == 0);
  const size_t rows = x.size() / in;
  std::vector<double> y(rows * out), h(hidden);
  // Plain loops in a fixed order: the targets are data, the same bytes wherever they are drawn.
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < hidden; ++j) {
      double a = teacher_.b1[j];
      for (size_t i = 0; i < in; ++i) a += teacher_.w1[j * in + i] * x[r * in + i];
      h[j] = a;
    }
    // tanh through SLEEF (vec::unary), as the engine's own tanh: libm's differs between C
    // libraries in the last bit, and the targets must be the same bytes on every machine.
    vec::unary(vec::Unary::tanh, h.data(), h.data(), static_cast<int64_t>(hidden));
    for (size_t o = 0; o < out; ++o) {
      double a = teacher_.b2[o];
      for (size_t j = 0; j < hidden; ++j) a += teacher_.w2[o * hidden + j] * h[j];
      y[r * out + o] = a;
    }
  }
  return y;
}

std::string ElasticModel::param_name(size_t i) const {
  return std::string(i % 2 == 0 ? "w" : "b") + std::to_string(i / 2 + 1);
}

std::vector<Tensor> ElasticModel::initial_params() const {
  const Prng base = Prng(seed_).fork(kParamStream);
  std::vector<Tensor> out;
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    const int64_t in = spec_.in_of(l), width = spec_.layers[l].out;
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // nn.Linear's init
    out.push_back(from_values({width, in}, uniform_values(base.fork(2 * l), width * in, bound)));
    out.push_back(from_values({width}, uniform_values(base.fork(2 * l + 1), width, bound)));
  }
  return out;
}

std::pair<Tensor, Tensor> ElasticModel::batch(uint64_t step) const {
  const Prng base = Prng(seed_).fork(kBatchStream).fork(step);
  const int64_t batch = spec_.batch, out = spec_.layers.back().out;
  std::vector<double> x = uniform_values(base.fork(0), batch * spec_.input, 1.0);
  std::vector<double> y = teach(x);
  return {from_values({batch, int64_t{spec_.input}}, std::move(x)), from_values({batch, out}, std::move(y))};
}

std::vector<Tensor> ElasticModel::train_locally(uint64_t steps, std::vector<double>* losses) const {
  rpc::FunctionRegistry registry = rpc::FunctionRegistry::with_builtins();
  add_program_functions(registry);
  std::vector<Tensor> params = initial_params();
  for (Tensor& p : params) p.set_requires_grad(true);
  std::unique_ptr<optim::Optimizer> optimizer = make_local_optimizer(spec_.optimizer, params);
  for (uint64_t k = 0; k < steps; ++k) {
    const auto [x, y] = batch(k);
    Tensor h = x;
    for (size_t l = 0; l < spec_.layers.size(); ++l) {
      h = local_layer(registry, h, params[2 * l], params[2 * l + 1], spec_.layers[l].activation);
    }
    const Tensor loss = mse_loss(h, y);
    if (losses != nullptr) losses->push_back(loss.item());
    const autograd::variable_list grads = autograd::Engine::grad({loss}, params);
    optimizer->step(grads);
  }
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(clone(detach(p)));
  return out;
}

namespace {

// Rank 0: from the last committed checkpoint to the job's last step.
void drive(const ElasticModel& model, const rendezvous::RendezvousInfo& info, const std::vector<WorkerId>& members,
           bool store_restarted, WorkerServices s, const TrainingListener& listener) {
  const ElasticSpec& spec = model.spec();
  const std::string key = checkpoint_key(spec);
  const store::Versioned loaded = s.store.get_versioned(key);
  Checkpoint checkpoint;
  if (loaded.version != 0) {
    checkpoint = decode_checkpoint(loaded.value, spec);
  } else if (store_restarted) {
    throw errors::checkpoint_invalid("no checkpoint at " + key + ": the store restarted empty and lost it, and starting "
                                     "over would apply committed steps twice");
  } else {
    checkpoint.params = model.initial_params();
    checkpoint.optimizer.resize(model.num_params());
  }
  if (listener.started) listener.started(checkpoint.step);
  if (checkpoint.step >= spec.steps) return;

  // The parameters on this round's owners, with the optimizer state they had.
  std::vector<rpc::RRef> params;
  for (size_t i = 0; i < model.num_params(); ++i) {
    params.push_back(s.agent.remote(members.at(model.owner_rank(i, info.world_size)), "dagsim.parameter",
                                    {{checkpoint.params[i]}, {}}));
  }
  optim::DistributedOptimizer optimizer(s.agent, optimizer_config(spec.optimizer), params);
  optimizer.load_state_dict(checkpoint.optimizer);

  uint64_t version = loaded.version;
  for (uint64_t step = checkpoint.step; step < spec.steps; ++step) {
    const auto [x, y] = model.batch(step);
    double loss_value = 0;
    {
      dist_autograd::DistAutograd::Context context(s.autograd);
      Tensor h = x;
      for (size_t l = 0; l < spec.layers.size(); ++l) {
        rpc::CallArgs args;
        args.tensors = {h};
        args.rrefs = {params[2 * l], params[2 * l + 1]};
        args.attributes["activation"] = static_cast<double>(spec.layers[l].activation);
        h = s.agent.rpc_sync(params[2 * l].owner(), "mlp_layer", args).at(0);
      }
      const Tensor loss = mse_loss(h, y);
      loss_value = loss.item();
      if (listener.backward) listener.backward();
      s.autograd.backward(context.id(), {loss});
      optimizer.step(context.id());
    }
    // The commit: the step's parameters and optimizer state, by compare-and-set on the version
    // this group loaded or last wrote. Another group that committed meanwhile wins; this one stops.
    Checkpoint next;
    next.step = step + 1;
    next.round = info.round;
    // Every owner at once: the parameters' fetches and the optimizer states.
    std::vector<runtime::Future<std::vector<Tensor>>> fetches;
    for (const rpc::RRef& p : params) fetches.push_back(p.to_here_async());
    next.optimizer = optimizer.state_dict();
    for (auto& f : fetches) next.params.push_back(clone(detach(f.get().at(0))));
    const store::CasOutcome outcome = s.store.compare_set_version(key, version, encode_checkpoint(next));
    if (!outcome.written) {
      throw errors::checkpoint_conflict("round " + std::to_string(info.round) + " could not commit step " +
                                        std::to_string(next.step) + ": " + key + " moved from version " +
                                        std::to_string(version) + " to " + std::to_string(outcome.current.version));
    }
    version = outcome.current.version;
    if (listener.committed) listener.committed(next, version, loss_value);
  }
}

// Other ranks: until the checkpoint says the job's last step committed. Store time-outs are quiet
// (a long step); a store that cannot be reached is the agent's to find (its monitor syncs).
void follow(const ElasticModel& model, WorkerServices s, runtime::Clock& clock) {
  const ElasticSpec& spec = model.spec();
  const std::string key = checkpoint_key(spec);
  uint64_t known = 0;
  for (;;) {
    store::Versioned now;
    try {
      now = s.store.watch_at_most(key, known, spec.rendezvous.store_timeout);
    } catch (const Error& e) {
      runtime::rethrow_if_unwinding(e);
      if (e.code() != ErrorCode::connection_failed && e.code() != ErrorCode::timed_out) throw;
      clock.sleep(std::min(spec.rendezvous.store_timeout, runtime::Duration{std::chrono::seconds(1)}));
      continue;
    }
    if (now.version != known && now.version != 0 && decode_checkpoint(now.value, spec).step >= spec.steps) return;
    known = now.version;
  }
}

}  // namespace

void run_elastic_worker(const ElasticModel& model, const rendezvous::RendezvousInfo& info, const std::vector<WorkerId>& members,
                        bool store_restarted, WorkerServices services, const TrainingListener& listener) {
  DAGSIM_ASSERT(members.size() == info.world_size && info.rank < info.world_size);
  if (info.rank == 0) return drive(model, info, members, store_restarted, services, listener);
  follow(model, services, services.agent.env().clock);
}

}  // namespace dagsim::scenarios
