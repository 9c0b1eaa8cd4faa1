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
// Max-heap on sequence_nr: the latest op first. The key is copied beside the task so the heap
// never touches the nodes themselves (a wide graph's heap would miss the cache on every compare).
bool heap_less(const GraphTask::ReadyEntry& a, const GraphTask::ReadyEntry& b) {
  return a.sequence_nr < b.sequence_nr;
}
}  // namespace

void GraphTask::push_ready(NodeTask task) {
  DAGSIM_ASSERT(task.node != nullptr);
  const uint64_t sequence_nr = task.node->sequence_nr();
  ready_.push_back(ReadyEntry{sequence_nr, std::move(task)});
  std::push_heap(ready_.begin(), ready_.end(), heap_less);
}

NodeTask GraphTask::pop_ready() {
  DAGSIM_ASSERT(!ready_.empty());
  std::pop_heap(ready_.begin(), ready_.end(), heap_less);
  NodeTask task = std::move(ready_.back().task);
  ready_.pop_back();
  return task;
}

bool GraphTask::should_execute(Node* node) const {
  if (exec_info.empty()) return true;
  const ExecInfo* info = exec_info.find(node);
  return info != nullptr && info->needed;
}

}  // namespace dagsim::autograd
