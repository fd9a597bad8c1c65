// The few PTX instructions the streaming tensor-core kernels (Width64FusedMLP, FullyFusedMLP's
// streaming inference kernel) are built from (sm_80 and newer; stmatrix sm_90), each wrapped
// once. Shared-memory operands are 32-bit shared-window addresses.
// CUDA only: HIP builds compile neither src/cuda/width64 nor fused/stream_inference.cu.
#pragma once

#if defined(TINYFUSE_WITH_HIP)
#error "ptx_sm80.cuh is NVIDIA PTX; HIP builds leave out the units that include it (src/cuda/hip.cmake)"
#endif

#include <cstdint>

#include <cuda_fp16.h>

namespace tinyfuse::cuda::ptx {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices from shared memory; lanes 8q..8q+7 give the row addresses of matrix q.
// Lane l receives, in r[q], elements (l / 4, 2 (l % 4) .. +1) of matrix q.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// The same with every matrix transposed: lane l receives, in r[q], elements (2 (l % 4) .. +1,
// l / 4) of matrix q (the B operand of a product with a row-major matrix read transposed).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // (declared in the host pass for sm_90-only callers)
// The inverse of ldmatrix_x4: r[q] goes back to where ldmatrix_x4 would have read it.
__device__ __forceinline__ void stmatrix_x4(uint32_t address, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :
               : "r"(address), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
#endif

// d = a (16x16, row) * b (16x8, col) + c, FP16 operands, FP32 accumulation.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                          const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// 16 bytes global -> shared, asynchronous, through L2 only. Reads `src_bytes` (16 or 0) bytes
// and zero-fills the rest, so a row past the batch reads nothing and becomes zeros.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

__device__ __forceinline__ uint4 ld_shared_16(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address)
               : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_16(uint32_t address, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void st_shared_4(uint32_t address, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_4(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(address) : "memory");
  return v;
}
// 16-byte global load marked streaming (evict first): read once, as a loss target is.
__device__ __forceinline__ uint4 ld_global_streaming_16(const void* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
// 16-byte global store marked streaming (evict first): outputs are not read again by this kernel.
__device__ __forceinline__ void st_global_streaming_16(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Two FP32 values rounded to FP16 (lo in the low half, the lower column index as mma expects).
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
// The same with ReLU. Rounding keeps the sign, so ReLU after rounding equals rounding after ReLU;
// a NaN becomes 0, as the CPU's z > 0 ? z : 0 does.
__device__ __forceinline__ uint32_t pack_half2_relu(float lo, float hi) {
  const __half2 h = __hmax2(__floats2half2_rn(lo, hi), __float2half2_rn(0.0f));
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace tinyfuse::cuda::ptx
