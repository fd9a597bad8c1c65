// The vendor header: every GPU runtime call of tinyfuse goes through these names, so the same
// sources build for CUDA today and for HIP (hip* / hipblasLt*) when TINYFUSE_WITH_HIP is set.
// HIP builds have the BLAS-Lt names only with TINYFUSE_WITH_HIPBLASLT (hipBLASLt found);
// TF_GPU_HAS_BLASLT says which (docs/PLATFORMS.md lists what each build compiles).
#pragma once

#include <string>

#include "tinyfuse/errors.h"

#if defined(TINYFUSE_WITH_HIP)
#include <hip/hip_runtime.h>
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuErrorInvalidValue hipErrorInvalidValue
#define gpuStream_t hipStream_t
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpy2DAsync hipMemcpy2DAsync
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyDefault hipMemcpyDefault
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuMemGetInfo hipMemGetInfo
#define gpuGetDevice hipGetDevice
#define gpuStreamPerThread hipStreamPerThread
#define gpuMemPool_t hipMemPool_t
#define gpuDeviceGetDefaultMemPool hipDeviceGetDefaultMemPool
#define gpuMemPoolSetAttribute hipMemPoolSetAttribute
#define gpuMemPoolGetAttribute hipMemPoolGetAttribute
#define gpuMemPoolTrimTo hipMemPoolTrimTo
#define gpuSetDevice hipSetDevice
#define gpuMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold
#define gpuMallocAsync hipMallocAsync
#define gpuFreeAsync hipFreeAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemset2DAsync hipMemset2DAsync
#define gpuDeviceSynchronize hipDeviceSynchronize
// Device queries, kernel attributes, streams and graphs (the fused MLPs, the GPU tests).
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define gpuDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
#define gpuDevAttrComputeCapabilityMinor hipDeviceAttributeComputeCapabilityMinor
#define gpuDevAttrWarpSize hipDeviceAttributeWarpSize
#define gpuDevAttrL2CacheSize hipDeviceAttributeL2CacheSize
#define gpuDeviceProp_t hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuFuncAttributes hipFuncAttributes
#define gpuFuncGetAttributes hipFuncGetAttributes
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuLaunchKernel hipLaunchKernel
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeGlobal hipStreamCaptureModeGlobal
#define gpuStreamCaptureMode hipStreamCaptureMode
#define gpuGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuGraphDestroy hipGraphDestroy
#define gpuDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
// hipBLASLt: the cuBLASLt names below, for the BlasLt MLPs (src/cuda/blaslt_*).
#if defined(TINYFUSE_WITH_HIPBLASLT)
#define TF_GPU_HAS_BLASLT 1
#include <hipblaslt/hipblaslt.h>
#define gpublasStatus_t hipblasStatus_t
#define GPUBLAS_STATUS_SUCCESS HIPBLAS_STATUS_SUCCESS
#define GPUBLAS_STATUS_NOT_SUPPORTED HIPBLAS_STATUS_NOT_SUPPORTED
#define gpublasOperation_t hipblasOperation_t
#define GPUBLAS_OP_N HIPBLAS_OP_N
#define GPUBLAS_OP_T HIPBLAS_OP_T
#define gpublasComputeType_t hipblasComputeType_t
#define GPUBLAS_COMPUTE_32F HIPBLAS_COMPUTE_32F
#define gpuDataType_t hipDataType
#define GPU_R_32F HIP_R_32F
#define GPU_R_16F HIP_R_16F
#define gpublasLtHandle_t hipblasLtHandle_t
#define gpublasLtCreate hipblasLtCreate
#define gpublasLtDestroy hipblasLtDestroy
#define gpublasLtMatmulDesc_t hipblasLtMatmulDesc_t
#define gpublasLtMatmulDescCreate hipblasLtMatmulDescCreate
#define gpublasLtMatmulDescDestroy hipblasLtMatmulDescDestroy
#define gpublasLtMatmulDescSetAttribute hipblasLtMatmulDescSetAttribute
#define gpublasLtMatrixLayout_t hipblasLtMatrixLayout_t
#define gpublasLtMatrixLayoutCreate hipblasLtMatrixLayoutCreate
#define gpublasLtMatrixLayoutDestroy hipblasLtMatrixLayoutDestroy
#define gpublasLtMatmulPreference_t hipblasLtMatmulPreference_t
#define gpublasLtMatmulPreferenceCreate hipblasLtMatmulPreferenceCreate
#define gpublasLtMatmulPreferenceDestroy hipblasLtMatmulPreferenceDestroy
#define gpublasLtMatmulPreferenceSetAttribute hipblasLtMatmulPreferenceSetAttribute
#define gpublasLtMatmulAlgo_t hipblasLtMatmulAlgo_t
#define gpublasLtMatmulHeuristicResult_t hipblasLtMatmulHeuristicResult_t
#define gpublasLtMatmulAlgoGetHeuristic hipblasLtMatmulAlgoGetHeuristic
#define gpublasLtMatmul hipblasLtMatmul
#define gpublasLtEpilogue_t hipblasLtEpilogue_t
#define GPUBLASLT_EPILOGUE_DEFAULT HIPBLASLT_EPILOGUE_DEFAULT
#define GPUBLASLT_EPILOGUE_BIAS HIPBLASLT_EPILOGUE_BIAS
#define GPUBLASLT_EPILOGUE_RELU_BIAS HIPBLASLT_EPILOGUE_RELU_BIAS
#define GPUBLASLT_MATMUL_DESC_TRANSA HIPBLASLT_MATMUL_DESC_TRANSA
#define GPUBLASLT_MATMUL_DESC_TRANSB HIPBLASLT_MATMUL_DESC_TRANSB
#define GPUBLASLT_MATMUL_DESC_EPILOGUE HIPBLASLT_MATMUL_DESC_EPILOGUE
#define GPUBLASLT_MATMUL_DESC_BIAS_POINTER HIPBLASLT_MATMUL_DESC_BIAS_POINTER
#define GPUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE HIPBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
#define GPUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
// hipBLASLt has no minimum-alignment preferences: its heuristic sees only the shapes.
#define TF_GPUBLASLT_HAS_ALIGNMENT_PREFS 0
#else
#define TF_GPU_HAS_BLASLT 0
#endif  // TINYFUSE_WITH_HIPBLASLT
#else
#include <cuda_runtime.h>
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuErrorInvalidValue cudaErrorInvalidValue
#define gpuStream_t cudaStream_t
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpy2DAsync cudaMemcpy2DAsync
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyDefault cudaMemcpyDefault
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuMemGetInfo cudaMemGetInfo
#define gpuGetDevice cudaGetDevice
#define gpuStreamPerThread cudaStreamPerThread
#define gpuMemPool_t cudaMemPool_t
#define gpuDeviceGetDefaultMemPool cudaDeviceGetDefaultMemPool
#define gpuMemPoolSetAttribute cudaMemPoolSetAttribute
#define gpuMemPoolGetAttribute cudaMemPoolGetAttribute
#define gpuMemPoolTrimTo cudaMemPoolTrimTo
#define gpuSetDevice cudaSetDevice
#define gpuMemPoolAttrReleaseThreshold cudaMemPoolAttrReleaseThreshold
#define gpuMallocAsync cudaMallocAsync
#define gpuFreeAsync cudaFreeAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemset2DAsync cudaMemset2DAsync
#define gpuDeviceSynchronize cudaDeviceSynchronize
// Device queries, kernel attributes, streams and graphs (the fused MLPs, the GPU tests).
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
#define gpuDevAttrComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define gpuDevAttrComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#define gpuDevAttrWarpSize cudaDevAttrWarpSize
#define gpuDevAttrL2CacheSize cudaDevAttrL2CacheSize
#define gpuDeviceProp_t cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuFuncAttributes cudaFuncAttributes
#define gpuFuncGetAttributes cudaFuncGetAttributes
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuLaunchKernel cudaLaunchKernel
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuStreamCaptureModeGlobal cudaStreamCaptureModeGlobal
#define gpuStreamCaptureMode cudaStreamCaptureMode
#define gpuGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphDestroy cudaGraphDestroy
#define gpuDevAttrMaxSharedMemoryPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
// cuBLASLt, for the BlasLt MLPs (src/cuda/blaslt_*).
#define TF_GPU_HAS_BLASLT 1
#include <cublasLt.h>
// Its functions are called through the table blaslt_library.cu opens at run time.
#include "cuda/blaslt_library.h"
#define gpublasStatus_t cublasStatus_t
#define GPUBLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define GPUBLAS_STATUS_NOT_SUPPORTED CUBLAS_STATUS_NOT_SUPPORTED
#define gpublasOperation_t cublasOperation_t
#define GPUBLAS_OP_N CUBLAS_OP_N
#define GPUBLAS_OP_T CUBLAS_OP_T
#define gpublasComputeType_t cublasComputeType_t
#define GPUBLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define gpuDataType_t cudaDataType_t
#define GPU_R_32F CUDA_R_32F
#define GPU_R_16F CUDA_R_16F
#define gpublasLtHandle_t cublasLtHandle_t
#define gpublasLtCreate(...) ::tinyfuse::gpu::blaslt_api().create(__VA_ARGS__)
#define gpublasLtDestroy(...) ::tinyfuse::gpu::blaslt_api().destroy(__VA_ARGS__)
#define gpublasLtMatmulDesc_t cublasLtMatmulDesc_t
#define gpublasLtMatmulDescCreate(...) ::tinyfuse::gpu::blaslt_api().matmul_desc_create(__VA_ARGS__)
#define gpublasLtMatmulDescDestroy(...) ::tinyfuse::gpu::blaslt_api().matmul_desc_destroy(__VA_ARGS__)
#define gpublasLtMatmulDescSetAttribute(...) ::tinyfuse::gpu::blaslt_api().matmul_desc_set_attribute(__VA_ARGS__)
#define gpublasLtMatrixLayout_t cublasLtMatrixLayout_t
#define gpublasLtMatrixLayoutCreate(...) ::tinyfuse::gpu::blaslt_api().matrix_layout_create(__VA_ARGS__)
#define gpublasLtMatrixLayoutDestroy(...) ::tinyfuse::gpu::blaslt_api().matrix_layout_destroy(__VA_ARGS__)
#define gpublasLtMatmulPreference_t cublasLtMatmulPreference_t
#define gpublasLtMatmulPreferenceCreate(...) ::tinyfuse::gpu::blaslt_api().matmul_preference_create(__VA_ARGS__)
#define gpublasLtMatmulPreferenceDestroy(...) ::tinyfuse::gpu::blaslt_api().matmul_preference_destroy(__VA_ARGS__)
#define gpublasLtMatmulPreferenceSetAttribute(...) ::tinyfuse::gpu::blaslt_api().matmul_preference_set_attribute(__VA_ARGS__)
#define gpublasLtMatmulAlgo_t cublasLtMatmulAlgo_t
#define gpublasLtMatmulHeuristicResult_t cublasLtMatmulHeuristicResult_t
#define gpublasLtMatmulAlgoGetHeuristic(...) ::tinyfuse::gpu::blaslt_api().matmul_algo_get_heuristic(__VA_ARGS__)
#define gpublasLtMatmul(...) ::tinyfuse::gpu::blaslt_api().matmul(__VA_ARGS__)
#define gpublasLtEpilogue_t cublasLtEpilogue_t
#define GPUBLASLT_EPILOGUE_DEFAULT CUBLASLT_EPILOGUE_DEFAULT
#define GPUBLASLT_EPILOGUE_BIAS CUBLASLT_EPILOGUE_BIAS
#define GPUBLASLT_EPILOGUE_RELU_BIAS CUBLASLT_EPILOGUE_RELU_BIAS
#define GPUBLASLT_MATMUL_DESC_TRANSA CUBLASLT_MATMUL_DESC_TRANSA
#define GPUBLASLT_MATMUL_DESC_TRANSB CUBLASLT_MATMUL_DESC_TRANSB
#define GPUBLASLT_MATMUL_DESC_EPILOGUE CUBLASLT_MATMUL_DESC_EPILOGUE
#define GPUBLASLT_MATMUL_DESC_BIAS_POINTER CUBLASLT_MATMUL_DESC_BIAS_POINTER
#define GPUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
#define GPUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES
#define GPUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES
#define TF_GPUBLASLT_HAS_ALIGNMENT_PREFS 1
#endif

namespace tinyfuse::gpu {

// Thrown for any failed runtime call; the message names the call and where it was made.
class GpuError : public Error {
 public:
  using Error::Error;
};

// What to do where the build has no device code for the current GPU: the architectures this build
// holds, the GPU's, and how to rebuild (device_code.cu). Empty for other errors.
std::string missing_device_code_advice(gpuError_t e);

[[noreturn]] inline void throw_gpu_error(gpuError_t e, const char* call, const char* file, int line) {
  throw GpuError(std::string(call) + " failed: " + gpuGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")" +
                 missing_device_code_advice(e));
}

#if TF_GPU_HAS_BLASLT
// The name and description of a BLAS-Lt status, for error messages.
inline std::string blaslt_status_string(gpublasStatus_t s) {
#if defined(TINYFUSE_WITH_HIP)
  return "hipBLASLt status " + std::to_string(static_cast<int>(s));
#else
  return std::string(blaslt_api().get_status_name(s)) + " (" + blaslt_api().get_status_string(s) + ")";
#endif
}

[[noreturn]] inline void throw_blaslt_error(gpublasStatus_t s, const char* call, const char* file, int line) {
  throw GpuError(std::string(call) + " failed: " + blaslt_status_string(s) + " (" + file + ":" + std::to_string(line) + ")");
}
#endif  // TF_GPU_HAS_BLASLT

}  // namespace tinyfuse::gpu

// Checks a runtime call; on failure throws GpuError naming the call.
#define TF_GPU_CHECK(call)                                                               \
  do {                                                                                   \
    gpuError_t tf_err_ = (call);                                                         \
    if (tf_err_ != gpuSuccess) ::tinyfuse::gpu::throw_gpu_error(tf_err_, #call, __FILE__, __LINE__); \
  } while (0)

// Checks an error code kept from an earlier call; `call` (a string) names that call in the message
// (TF_GPU_CHECK(e) would name it "e").
#define TF_GPU_CHECK_RESULT(err, call)                                                        \
  do {                                                                                     \
    gpuError_t tf_err_ = (err);                                                            \
    if (tf_err_ != gpuSuccess) ::tinyfuse::gpu::throw_gpu_error(tf_err_, call, __FILE__, __LINE__); \
  } while (0)

// Checks that the last kernel launch was accepted.
#define TF_GPU_CHECK_LAUNCH(name) TF_GPU_CHECK((static_cast<void>(name), gpuGetLastError()))

// Checks a BLAS-Lt (cuBLASLt / hipBLASLt) call; on failure throws GpuError naming the call and status.
#define TF_BLASLT_CHECK(call)                                                                  \
  do {                                                                                         \
    gpublasStatus_t tf_blas_status_ = (call);                                                  \
    if (tf_blas_status_ != GPUBLAS_STATUS_SUCCESS)                                             \
      ::tinyfuse::gpu::throw_blaslt_error(tf_blas_status_, #call, __FILE__, __LINE__);         \
  } while (0)

// Events (stream timing) under vendor-neutral names.
#if defined(TINYFUSE_WITH_HIP)
#define gpuEvent_t hipEvent_t
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#else
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#endif

// Warp (NVIDIA) / wavefront (AMD) size of the target being compiled. NVIDIA: 32. AMD: 32 on
// RDNA (gfx10, gfx11), 64 on GCN / CDNA (gfx9); fixed per target, so a HIP build knows it only in
// each target's device pass; its host pass sees 0. Code whose result depends on the warp size
// (shuffles, votes, warp-level matrix fragments) must use kWarpSize and static_assert the sizes it
// handles, guarded by kWarpSizeKnown; scripts/hip-compile-check.sh fails on a unit that uses warp
// intrinsics without naming kWarpSize. Thread groups of 32 that are not warps are named otherwise.
#if defined(TINYFUSE_WITH_HIP)
#if defined(__HIP_DEVICE_COMPILE__)
#define TF_GPU_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define TF_GPU_WARP_SIZE 0
#endif
#else
#define TF_GPU_WARP_SIZE 32
#endif

namespace tinyfuse::gpu {
inline constexpr int kWarpSize = TF_GPU_WARP_SIZE;
inline constexpr bool kWarpSizeKnown = kWarpSize != 0;
static_assert(!kWarpSizeKnown || kWarpSize == 32 || kWarpSize == 64, "unexpected warp size");
}  // namespace tinyfuse::gpu
