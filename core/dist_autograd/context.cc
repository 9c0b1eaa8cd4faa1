#include "core/dist_autograd/context.h"

#include "core/autograd/accumulate_grad.h"
#include "core/autograd/grad_mode.h"
#include "core/base/error.h"
#include "core/base/probe.h"
#include "core/tensor/ops.h"

namespace dagsim::dist_autograd {

void DistAutogradContext::add_send_function(MessageId id, std::shared_ptr<autograd::Node> send) {
  DAGSIM_ASSERT(send != nullptr);
  const bool inserted = sends_.emplace(id, std::move(send)).second;
  DAGSIM_ASSERT_MSG(inserted, "send function for autograd message id " + std::to_string(id) + " recorded twice");
}

void DistAutogradContext::add_recv_function(MessageId id, std::shared_ptr<autograd::Node> recv) {
  DAGSIM_ASSERT(recv != nullptr);
  // The id is the sender's (off the wire): a peer that sends one twice is refused, not asserted on.
  const bool inserted = recvs_.emplace(id, std::move(recv)).second;
  if (!inserted) {
    throw errors::protocol_error("autograd message id " + std::to_string(id) + " arrived twice in context " +
                                 std::to_string(context_id()));
  }
}

std::shared_ptr<autograd::Node> DistAutogradContext::retrieve_send_function(MessageId id) const {
  auto it = sends_.find(id);
  if (it == sends_.end()) {
    throw errors::invalid_argument("Could not find send function for autograd message id: " + std::to_string(id));
  }
  DAGSIM_ASSERT(it->second != nullptr);  // add_send_function refuses null
  return it->second;
}

std::string DistAutogradContext::describe_send(MessageId id) const {
  auto it = labels_.find(id);
  if (it == labels_.end()) return "autograd message id " + std::to_string(id);
  DAGSIM_ASSERT(!it->second.empty());  // set_send_label is called only with a label
  return "'" + it->second + "' (autograd message id " + std::to_string(id) + ")";
}

void DistAutogradContext::accumulate_grad(const Tensor& variable, Tensor grad) {
  DAGSIM_ASSERT(variable.defined() && grad.defined());
  // The engine checks every gradient's shape against its input's metadata: a leaf's gradient has
  // the leaf's shape, so accumulating never broadcasts.
  DAGSIM_ASSERT(grad.shape() == variable.shape());
  autograd::NoGradGuard no_grad;
  auto [it, inserted] = grad_index_.emplace(variable.unsafe_impl(), grads_.size());
  if (inserted) {
    Tensor first;
    autograd::AccumulateGrad::accumulate_into(&first, std::move(grad));  // stolen, or a copy
    grads_.emplace_back(variable, std::move(first));
    DAGSIM_ASSERT_EQ(grad_index_.size(), grads_.size());  // one entry per leaf, both ways
    return;
  }
  DAGSIM_ASSERT(it->second < grads_.size());
  DAGSIM_PROBE("dist_autograd.grad_accumulated_twice_in_context");
  Tensor& sum = grads_[it->second].second;
  sum = add(sum, grad);
  DAGSIM_ASSERT(sum.shape() == variable.shape());
}

std::vector<std::pair<Tensor, Tensor>> DistAutogradContext::gradients() const {
  autograd::NoGradGuard no_grad;
  std::vector<std::pair<Tensor, Tensor>> out;
  out.reserve(grads_.size());
  for (const auto& [variable, grad] : grads_) out.emplace_back(variable, grad);
  DAGSIM_ASSERT_EQ(out.size(), grad_index_.size());
  return out;
}

Tensor DistAutogradContext::gradient_of(const Tensor& variable) const {
  auto it = grad_index_.find(variable.unsafe_impl());
  if (it == grad_index_.end()) return Tensor();
  DAGSIM_ASSERT(it->second < grads_.size() && grads_[it->second].first.unsafe_impl() == variable.unsafe_impl());
  return grads_[it->second].second;
}

}  // namespace dagsim::dist_autograd
