// DeviceGuard: opens one op on its inputs' device, as PyTorch's dispatcher picks a kernel by the
// tensors' device.
//
// At the top of every public op: it checks that the op's tensors share one device (a 0-dim CPU
// tensor goes with any, as in PyTorch), throwing PyTorch's "Expected all tensors to be on the same
// device" naming both; while it is open, Tensor::empty allocates on that device, so the op's
// outputs land there without the op knowing; when the op returns, the device orders it as one
// kernel on its current stream, reading the inputs and writing what the op allocated (and
// `written`, for an in-place op). An op that throws launches nothing.
//
// Guards nest: an op built from other ops launches one kernel per inner op plus one for what it
// allocated itself. A guard over CPU tensors only costs two thread-local writes, and CPU outputs
// stay in the inline and pooled storage they always had.
//
// Threading: the open guard is thread-local (core/base/open_op_scope.h), not fiber-local, because
// an op never yields; a fiber that blocks with a guard open (a backward node sending its
// gradients, a backend waiting for a copy) steps out of it in the runtime's blocking point
// (WaitGuard) and back in when it resumes, so no other fiber sees it. DeviceGuard::Suspend does
// the same where code leaves the device on purpose (to allocate on the host).
#pragma once

#include <initializer_list>
#include <vector>

#include "core/base/open_op_scope.h"
#include "core/tensor/tensor.h"

namespace dagsim {

class DeviceGuard : private detail::OpScope {
 public:
  DeviceGuard(const char* op, std::initializer_list<const Tensor*> inputs, const Tensor* written = nullptr);
  DeviceGuard(const char* op, const std::vector<Tensor>& inputs);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  Device device() const { return device_; }
  bool on_device() const { return backend_ != nullptr; }

  // The device Tensor::empty allocates on now, and where its storage is noted for the launch.
  static DeviceGuard* active();
  void note_allocation(const std::shared_ptr<Storage>& storage) { allocated_.push_back(storage); }
  const std::shared_ptr<DeviceBackend>& backend() const { return backend_; }

  // Keeps `t` alive until the op closes (a scalar argument staged on the device for a kernel).
  void keep_alive(Tensor t) { staged_.push_back(std::move(t)); }

  // Marks this guard's kernel as a copy (the copy delay, not the kernel delay).
  void mark_copy() { copy_ = true; }
  // Orders the kernel after nothing it was given: for a caller that knows its inputs came from
  // this stream, in order, and will not keep them alive until the guard closes.
  void forget_reads() { reads_.clear(); }

  // Steps out of every open guard while the fiber blocks on the host, and back in after.
  class Suspend {
   public:
    Suspend() = default;
    Suspend(const Suspend&) = delete;
    Suspend& operator=(const Suspend&) = delete;

   private:
    detail::StepOutOfScopes step_out_;
  };

 private:
  void open();
  void add_input(const char* op, const Tensor& t);

  Device device_;
  std::shared_ptr<DeviceBackend> backend_;
  bool saw_cpu_ = false;  // a CPU tensor of one or more dims: no device may join it
  std::vector<Storage*> reads_;
  std::vector<Storage*> writes_;                  // `written`: held by the caller
  std::vector<std::weak_ptr<Storage>> allocated_;  // temporaries may be gone by the launch
  std::vector<Tensor> staged_;
  bool copy_ = false;
};

}  // namespace dagsim
