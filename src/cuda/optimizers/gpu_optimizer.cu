#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"

namespace tinyfuse::cuda {

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
