// The advice a "no kernel image" error gets: which GPU architectures this build compiled device
// code for (CMake passes CMAKE_CUDA_ARCHITECTURES as TINYFUSE_GPU_ARCHITECTURES), which the
// current GPU is, and how to rebuild for it.
#include <string>

#include "cuda/gpu_runtime.h"

#ifndef TINYFUSE_GPU_ARCHITECTURES
#define TINYFUSE_GPU_ARCHITECTURES "?"
#endif

namespace tinyfuse::gpu {

std::string missing_device_code_advice(gpuError_t e) {
#if defined(TINYFUSE_WITH_HIP)
  if (e != hipErrorNoBinaryForGpu && e != hipErrorInvalidDeviceFunction) return {};
  const std::string rebuild = "-DCMAKE_HIP_ARCHITECTURES=<its gfx name>";
#else
  if (e != cudaErrorNoKernelImageForDevice && e != cudaErrorInvalidDeviceFunction) return {};
  const std::string rebuild = "-DTINYFUSE_CUDA_ARCHITECTURES=native (or the number shown), or pip install . "
                              "-C cmake.define.TINYFUSE_CUDA_ARCHITECTURES=native";
#endif
  std::string gpu = "this GPU";
  int device = 0, major = 0, minor = 0;
  if (gpuGetDevice(&device) == gpuSuccess && gpuDeviceGetAttribute(&major, gpuDevAttrComputeCapabilityMajor, device) == gpuSuccess &&
      gpuDeviceGetAttribute(&minor, gpuDevAttrComputeCapabilityMinor, device) == gpuSuccess)
    gpu = "GPU " + std::to_string(device) + " (compute capability " + std::to_string(major) + "." + std::to_string(minor) +
          ", architecture " + std::to_string(major * 10 + minor) + ")";
  (void)gpuGetLastError();
  return ". This tinyfuse has device code for architectures " TINYFUSE_GPU_ARCHITECTURES " only, none of which runs on " +
         gpu + ": rebuild with " + rebuild;
}

}  // namespace tinyfuse::gpu
