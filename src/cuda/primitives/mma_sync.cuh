// Warp-level tensor-core products: one 16x8x16 matrix product (mma.sync m16n8k16, FP16 or BF16
// operands, FP32 accumulators) and the packing of accumulators into operand fragments. The
// operand fragments come from shared memory by ldmatrix (ldmatrix.cuh).
//
// Fragment layouts (PTX ISA, "mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A (16 x 16, row-major), 4 registers of two 16-bit values each:
//     a0 = A[g][2t, 2t+1]   a1 = A[g+8][2t, 2t+1]   a2 = A[g][2t+8, 2t+9]   a3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8, "col"), 2 registers:  b0 = B[2t, 2t+1][g]   b1 = B[2t+8, 2t+9][g]
//   C (16 x 8, FP32), 4 floats:      c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
// The C fragments of two adjacent 8-column tiles, packed to 16 bits, are exactly the A fragment
// of the 16 x 16 block they cover (a0 = c0c1 of the left tile, a1 = its c2c3, a2, a3 from the
// right tile): a layer's output stays in registers as the next layer's input.
//
// The lower 16 bits of a register hold the element of the smaller column (or row) index.
//
// Why inline PTX rather than WMMA: WMMA's fragment layout is opaque, so keeping activations in
// registers between layers (the property above) would need a round trip through shared memory
// per layer. The HIP path (amd_matrix_ops.cuh) keeps its rows in LDS between layers; mma.cuh picks
// this file or that one by vendor. The CUDA kernels assume 32 lanes and the layouts stated here.
#pragma once

#if defined(TINYFUSE_WITH_HIP)
#error "mma_sync.cuh is NVIDIA PTX; HIP builds use amd_matrix_ops.cuh (through mma.cuh)"
#endif

#include <cstdint>

#include "cuda/common.cuh"

namespace tinyfuse::cuda::ptx {

// The fragment layouts above are defined for 32-lane warps.
constexpr int kWarpSize = 32;

// Two 16-bit values of T in one register (lower = first).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Two FP32 values rounded to FP16 with ReLU (lo in the low half). Rounding keeps the sign, so ReLU after rounding equals rounding after ReLU;
// a NaN becomes 0, as the CPU's z > 0 ? z : 0 does.
__device__ __forceinline__ uint32_t pack_half2_relu(float lo, float hi) {
  const __half2 h = __hmax2(__floats2half2_rn(lo, hi), __float2half2_rn(0.0f));
  return *reinterpret_cast<const uint32_t*>(&h);
}


template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t v);
template <>
__device__ __forceinline__ float2 unpack2<__half>(uint32_t v) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}
template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t v) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}

// d += a * b for one 16x8x16 tile.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  // Turing: two m16n8k8 products (k 0-7 from a0, a1, b0; k 8-15 from a2, a3, b1).
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(b0));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[2]), "r"(a[3]), "r"(b1));
#elif defined(__CUDA_ARCH__)
  __trap();  // the host refuses devices below sm_75 before launching
#endif
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                          uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__)
  __trap();  // BF16 tensor cores start at sm_80; the host refuses older devices before launching
#endif
}

// Lane coordinates in the fragment layouts.
__device__ __forceinline__ int lane_group() { return (threadIdx.x % kWarpSize) / 4; }   // g
__device__ __forceinline__ int lane_in_group() { return (threadIdx.x % kWarpSize) % 4; }  // t

}  // namespace tinyfuse::cuda::ptx
