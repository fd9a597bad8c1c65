// Two kernels of one stream that touch disjoint data may run side by side without a second stream
// (which would tie every caller's stream to it): the second is launched as a programmatic
// dependent of the first (compute capability 9.0), which lets it start once each block of the first
// has called let_dependent_kernel_start(). Whatever follows the second on the stream must still see
// both finished, so one block of the second calls wait_for_prerequisite_kernel(): the second then
// cannot finish before the first has, with its writes visible. On HIP and older devices the two
// run one after the other, as any launch.
#pragma once

#include <utility>

#include "cuda/gpu_runtime.h"

namespace tinyfuse::cuda {

// In every block of the first kernel, as early as it likes.
__device__ __forceinline__ void let_dependent_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(TINYFUSE_WITH_HIP)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// In (every thread of) one block of the second: returns once the first has finished and its writes
// are visible; at once where the launch was an ordinary one.
__device__ __forceinline__ void wait_for_prerequisite_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(TINYFUSE_WITH_HIP)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether launch_beside_previous() can overlap on the current device.
inline bool dependent_launch_available() {
#if defined(TINYFUSE_WITH_HIP)
  return false;
#else
  int device = 0, major = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  TF_GPU_CHECK(gpuDeviceGetAttribute(&major, gpuDevAttrComputeCapabilityMajor, device));
  return major >= 9;
#endif
}

// kernel<<<blocks, threads, smem, stream>>>(args...), as a programmatic dependent of the kernel
// before it on the stream where `beside` (the caller has checked dependent_launch_available() and
// that the kernel before it is one that calls let_dependent_kernel_start()).
template <typename... Params, typename... Args>
void launch_beside_previous(bool beside, dim3 blocks, dim3 threads, size_t smem, gpuStream_t stream,
                            void (*kernel)(Params...), Args&&... args) {
#if !defined(TINYFUSE_WITH_HIP)
  if (beside) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = blocks;
    config.blockDim = threads;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    TF_GPU_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
    return;
  }
#endif
  kernel<<<blocks, threads, smem, stream>>>(std::forward<Args>(args)...);
}

}  // namespace tinyfuse::cuda
