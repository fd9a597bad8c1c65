// Helpers every CUDA source of the backend shares: streams, launch geometry, element types.
#pragma once

#include <cstdint>

#include "cuda/gpu_runtime.h"
#include "tinyfuse/tensor.h"

#if defined(TINYFUSE_WITH_HIP)
#include <hip/hip_fp16.h>
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>  // ROCm 6: __hip_bfloat16 (written, not compiled here)
using __nv_bfloat16 = __hip_bfloat16;
#define TF_BF16_TO_FLOAT(x) __bfloat162float(x)
#define TF_FLOAT_TO_BF16(x) __float2bfloat16(x)
#else
#include <hip/hip_bfloat16.h>  // HIP 5.x (Debian 12): hip_bfloat16, round-to-nearest-even from float
using __nv_bfloat16 = hip_bfloat16;
#define TF_BF16_TO_FLOAT(x) static_cast<float>(x)
#define TF_FLOAT_TO_BF16(x) hip_bfloat16(x)
#endif
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TF_BF16_TO_FLOAT(x) __bfloat162float(x)
#define TF_FLOAT_TO_BF16(x) __float2bfloat16_rn(x)
#endif

namespace tinyfuse::cuda {

// A TensorView's stream as a runtime stream. Null means this thread's default stream: tinyfuse
// never queues work on the legacy default stream, which would serialise with every stream.
inline gpuStream_t stream_of(const TensorView& t) {
  return t.stream ? static_cast<gpuStream_t>(t.stream) : gpuStreamPerThread;
}
inline gpuStream_t stream_of(Stream s) { return s ? static_cast<gpuStream_t>(s) : gpuStreamPerThread; }

constexpr int kThreadsPerBlock = 256;

// On a kernel always launched with kThreadsPerBlock threads (blocks_for): under HIP, clang then
// sizes its register budget for 256 threads instead of its default of 1024 (128 VGPRs a lane on
// wave64 targets, fewer than the lane has), so heavy kernels keep their values in registers
// rather than spilling them to scratch. Nothing under CUDA, where the limit is 255 registers a
// thread either way.
#if defined(TINYFUSE_WITH_HIP)
#define TF_HIP_DEFAULT_BLOCK_BOUNDS __launch_bounds__(kThreadsPerBlock)
#else
#define TF_HIP_DEFAULT_BLOCK_BOUNDS
#endif

// 16-byte copies (cp.async, vector loads and stores) need 16-byte aligned addresses; for rows of
// 16-bit elements every row starts aligned when the first does and the row stride is a multiple of 8.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
inline bool rows_aligned16_16bit(const TensorView& t) { return aligned16(t.data) && t.strides[0] % 8 == 0; }

inline unsigned blocks_for(int64_t n, int threads = kThreadsPerBlock) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// Element types by DType, and conversions through float inside kernels.
template <typename T> struct gpu_dtype_of;
template <> struct gpu_dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct gpu_dtype_of<__half> { static constexpr DType value = DType::F16; };
template <> struct gpu_dtype_of<__nv_bfloat16> { static constexpr DType value = DType::BF16; };

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return TF_BF16_TO_FLOAT(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return TF_FLOAT_TO_BF16(x); }

// N consecutive elements moved with one vector load or store (N * sizeof(T) bytes, at most 16),
// for elementwise kernels that are bound by memory: a thread per 1-, 2- or 4-byte element leaves
// too few bytes in flight to reach the bandwidth. The pointer + i must be pack-aligned.
template <typename T, int N>
struct alignas(N * sizeof(T)) Pack {
  static_assert(N * sizeof(T) <= 16, "one vector access moves at most 16 bytes");
  T v[N];
};
template <int N, typename T>
__device__ __forceinline__ Pack<T, N> load_pack(const T* p, int64_t i) {
  return *reinterpret_cast<const Pack<T, N>*>(p + i);
}
template <typename T, int N>
__device__ __forceinline__ void store_pack(T* p, int64_t i, const Pack<T, N>& x) {
  *reinterpret_cast<Pack<T, N>*>(p + i) = x;
}
template <int N, typename T>
inline bool pack_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (N * sizeof(T)) == 0;
}

}  // namespace tinyfuse::cuda
