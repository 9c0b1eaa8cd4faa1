#include "core/autograd/graph_task.h"

#include <algorithm>

#include "core/autograd/grad_mode.h"
#include "core/tensor/ops.h"

namespace dagsim::autograd {

void InputBuffer::add(size_t pos, Tensor grad) {
  DAGSIM_ASSERT(pos < buffer_.size());
  if (!grad.defined()) return;
  Tensor& slot = buffer_[pos];
  if (!slot.defined()) {
    slot = std::move(grad);
    return;
  }
  NoGradGuard no_grad;
  slot = dagsim::add(slot, grad);
}

namespace {
// Max-heap on sequence_nr: the latest op first.
bool heap_less(const NodeTask& a, const NodeTask& b) {
  return a.node->sequence_nr() < b.node->sequence_nr();
}
}  // namespace

void GraphTask::push_ready(NodeTask task) {
  DAGSIM_ASSERT(task.node != nullptr);
  ready_.push_back(std::move(task));
  std::push_heap(ready_.begin(), ready_.end(), heap_less);
}

NodeTask GraphTask::pop_ready() {
  DAGSIM_ASSERT(!ready_.empty());
  std::pop_heap(ready_.begin(), ready_.end(), heap_less);
  NodeTask task = std::move(ready_.back());
  ready_.pop_back();
  return task;
}

bool GraphTask::should_execute(Node* node) const {
  if (exec_info.empty()) return true;
  auto it = exec_info.find(node);
  return it != exec_info.end() && it->second.needed;
}

}  // namespace dagsim::autograd
