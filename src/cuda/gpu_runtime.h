// The vendor header: every GPU runtime call of tinyfuse goes through these names, so the same
// sources build for CUDA today and for HIP (hip* / hipblasLt*) when TINYFUSE_WITH_HIP is set.
#pragma once

#include <string>

#include "tinyfuse/errors.h"

#if defined(TINYFUSE_WITH_HIP)
#include <hip/hip_runtime.h>
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuStream_t hipStream_t
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy2DAsync hipMemcpy2DAsync
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyDefault hipMemcpyDefault
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDevice hipGetDevice
#define gpuStreamPerThread hipStreamPerThread
#define gpuMemPool_t hipMemPool_t
#define gpuDeviceGetDefaultMemPool hipDeviceGetDefaultMemPool
#define gpuMemPoolSetAttribute hipMemPoolSetAttribute
#define gpuMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold
#define gpuMallocAsync hipMallocAsync
#define gpuFreeAsync hipFreeAsync
#else
#include <cuda_runtime.h>
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuStream_t cudaStream_t
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy2DAsync cudaMemcpy2DAsync
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyDefault cudaMemcpyDefault
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDevice cudaGetDevice
#define gpuStreamPerThread cudaStreamPerThread
#define gpuMemPool_t cudaMemPool_t
#define gpuDeviceGetDefaultMemPool cudaDeviceGetDefaultMemPool
#define gpuMemPoolSetAttribute cudaMemPoolSetAttribute
#define gpuMemPoolAttrReleaseThreshold cudaMemPoolAttrReleaseThreshold
#define gpuMallocAsync cudaMallocAsync
#define gpuFreeAsync cudaFreeAsync
#endif

namespace tinyfuse::gpu {

// Thrown for any failed runtime call; the message names the call and where it was made.
class GpuError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] inline void throw_gpu_error(gpuError_t e, const char* call, const char* file, int line) {
  throw GpuError(std::string(call) + " failed: " + gpuGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace tinyfuse::gpu

// Checks a runtime call; on failure throws GpuError naming the call.
#define TF_GPU_CHECK(call)                                                               \
  do {                                                                                   \
    gpuError_t tf_err_ = (call);                                                         \
    if (tf_err_ != gpuSuccess) ::tinyfuse::gpu::throw_gpu_error(tf_err_, #call, __FILE__, __LINE__); \
  } while (0)

// Checks that the last kernel launch was accepted.
#define TF_GPU_CHECK_LAUNCH(name) TF_GPU_CHECK((static_cast<void>(name), gpuGetLastError()))
