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

// Whether `kernel` can start beside the kernel before it: a device of compute capability 9.0 or
// later, and the kernel's code compiled for a virtual architecture that has griddepcontrol (code
// built for sm_80 and JIT-compiled for a Hopper device has no wait in it, and what follows it on
// the stream could then start before the first kernel ends).
inline bool dependent_launch_available(const void* kernel) {
#if defined(TINYFUSE_WITH_HIP)
  (void)kernel;
  return false;
#else
  int device = 0, major = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  TF_GPU_CHECK(gpuDeviceGetAttribute(&major, gpuDevAttrComputeCapabilityMajor, device));
  if (major < 9) return false;
  gpuFuncAttributes attributes{};
  TF_GPU_CHECK(gpuFuncGetAttributes(&attributes, kernel));
  return attributes.ptxVersion >= 90;
#endif
}

// kernel<<<blocks, threads, smem, stream>>>(args...), as a programmatic dependent of the kernel
// before it on the stream where `beside` (the kernel before it is one that calls
// let_dependent_kernel_start(), and `kernel` calls wait_for_prerequisite_kernel() in one block) and
// dependent_launch_available(kernel); an ordinary launch otherwise.
template <typename... Params, typename... Args>
void launch_beside_previous(bool beside, dim3 blocks, dim3 threads, size_t smem, gpuStream_t stream,
                            void (*kernel)(Params...), Args&&... args) {
#if !defined(TINYFUSE_WITH_HIP)
  if (beside && dependent_launch_available(reinterpret_cast<const void*>(kernel))) {
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
