// What the GPU optimizers share: a base class (the device-neutral OptimizerBase on CUDA/HIP) and
// state transfers. The checked arguments of step() (StepArgs, begin_step) are core's.
//
// Streams: step() queues its kernels on the stream of the `master` view and never waits.
// allocate(), state_data() and load_state() are rare and synchronous: they first wait for all
// work queued on the device (whichever stream and thread the steps ran on, even one since
// destroyed), then transfer on this thread's default stream and wait for that too.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/optimizer_config.h"
#include "core/optimizers/optimizer_base.h"

namespace tinyfuse::cuda {

class GpuOptimizer : public OptimizerBase {
 public:
  using OptimizerBase::OptimizerBase;
  Device device() const override { return Device::CUDA; }

 protected:
  // Device <-> host copies of optimizer state, and zeroing (for allocate()); see above.
  void download(void* host, const void* device, size_t bytes) const;
  void upload(void* device, const void* host, size_t bytes) const;
  void zero(void* device, size_t bytes) const;
};

std::unique_ptr<GpuOptimizer> make_gpu_optimizer(const OptimizerSpec& spec);
std::unique_ptr<GpuOptimizer> make_adam(const OptimizerSpec& spec);
std::unique_ptr<GpuOptimizer> make_sgd(const OptimizerSpec& spec);
std::unique_ptr<GpuOptimizer> make_ema(const OptimizerSpec& spec);

}  // namespace tinyfuse::cuda
