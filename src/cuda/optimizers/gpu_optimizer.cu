#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"

namespace tinyfuse::cuda {

GpuOptimizer::StepArgs GpuOptimizer::begin_step(float loss_scale, const TensorView& master, const TensorView& params,
                                                const TensorView& gradients) {
  if (!allocated()) throw Error(who() + ": step() called before allocate()");
  const bool alias = check_step_views(*this, loss_scale, master, params, gradients);
  StepArgs a;
  a.n = n_params();
  a.master = static_cast<float*>(master.data);
  a.params_dtype = params.dtype;
  a.params = alias ? nullptr : params.data;
  a.gradients = gradients.data;
  a.gradients_dtype = gradients.dtype;
  a.stream = master.stream;
  return a;
}

void GpuOptimizer::download(void* host, const void* device, size_t bytes) const {
  if (bytes == 0) return;
  TF_GPU_CHECK(gpuDeviceSynchronize());  // the steps that wrote the state, on any stream
  TF_GPU_CHECK(gpuMemcpyAsync(host, device, bytes, gpuMemcpyDefault, gpuStreamPerThread));
  TF_GPU_CHECK(gpuStreamSynchronize(gpuStreamPerThread));
}

void GpuOptimizer::upload(void* device, const void* host, size_t bytes) const {
  if (bytes == 0) return;
  TF_GPU_CHECK(gpuDeviceSynchronize());  // steps still reading the state, on any stream
  TF_GPU_CHECK(gpuMemcpyAsync(device, host, bytes, gpuMemcpyDefault, gpuStreamPerThread));
  TF_GPU_CHECK(gpuStreamSynchronize(gpuStreamPerThread));  // before the next step, on any stream
}

void GpuOptimizer::zero(void* device, size_t bytes) const {
  if (bytes == 0) return;
  TF_GPU_CHECK(gpuDeviceSynchronize());
  TF_GPU_CHECK(gpuMemsetAsync(device, 0, bytes, gpuStreamPerThread));
  TF_GPU_CHECK(gpuStreamSynchronize(gpuStreamPerThread));
}

}  // namespace tinyfuse::cuda
