// Per-wave building blocks of the HIP fused kernels, shared by FullyFusedMLP's forward
// and backward kernels (forward_hip.cuh, backward_hip.cuh) and Width64FusedMLP's
// (width64/width64_kernel_hip.cuh):
//  - load_rows: a wave's batch rows from global memory into its LDS activation buffer, zeros past
//    the batch (so products never read outside the batch);
//  - product: accumulators of (rows x k activations in LDS) x (k x 16 n weights in LDS), the
//    weights transposed (forward) or as stored (product_untransposed, backward);
//  - for_each_element (primitives/amd_matrix_ops.cuh): an accumulator block to an element-wise
//    epilogue, in the registers of the lanes that hold it.
// Everything is per wave: the caller's wave_sync() calls order the LDS traffic between steps.
#pragma once

#include <cstdint>

#include "cuda/primitives/amd_matrix_ops.cuh"

namespace tinyfuse::cuda::fused {

// Bytes of one wave's LDS: `rows` activation rows of ld_elems elements (a row stride), rounded
// up to 16 so the next wave's rows start 16-byte aligned.
__host__ __device__ constexpr size_t wave_lds_bytes(int rows, int ld_elems, size_t elem_bytes) {
  return (static_cast<size_t>(rows) * ld_elems * elem_bytes + 15) / 16 * 16;
}

// Rows [row0, row0 + rows) x [0, cols) of a row-major global matrix (row stride ld_src) into LDS
// (row stride ld_dst); rows past the batch become zeros. Element-wise (16-bit), so any alignment.
template <typename T>
__device__ __forceinline__ void load_rows(T* dst, int ld_dst, const T* src, int64_t ld_src, int64_t row0, int rows,
                                          int cols, int64_t batch, int lane) {
  const uint16_t* s16 = reinterpret_cast<const uint16_t*>(src);
  uint16_t* d16 = reinterpret_cast<uint16_t*>(dst);
  for (int i = lane; i < rows * cols; i += kWarpSize) {
    const int r = i / cols, c = i - r * cols;
    const int64_t row = row0 + r;
    d16[r * ld_dst + c] = row < batch ? s16[row * ld_src + c] : uint16_t{0};
  }
}

// The same with 16-byte copies: src 16-byte aligned, ld_src and ld_dst multiples of 8, dst
// 16-byte aligned, cols a multiple of 8.
template <typename T>
__device__ __forceinline__ void load_rows_16(T* dst, int ld_dst, const T* src, int64_t ld_src, int64_t row0, int rows,
                                             int cols, int64_t batch, int lane) {
  const int chunks = cols / 8;
  for (int i = lane; i < rows * chunks; i += kWarpSize) {
    const int r = i / chunks, c = (i - r * chunks) * 8;
    const int64_t row = row0 + r;
    const uint4 v = row < batch ? *reinterpret_cast<const uint4*>(src + row * ld_src + c) : make_uint4(0, 0, 0, 0);
    *reinterpret_cast<uint4*>(dst + r * ld_dst + c) = v;
  }
}

// acc[m][n] += X[16 m .., 0 .. k) * W[16 n .., 0 .. k)^T for m < MT, n < NB: x is the wave's LDS
// activation rows (row stride ldx), w the weight rows of the first output column block (out x in,
// row stride ldw). k is a multiple of 16.
template <typename T, int MT, int NB>
__device__ __forceinline__ void product(FragAcc (&acc)[MT][NB], const T* x, int ldx, const T* w, int ldw, int k) {
  // Rolled: unrolled, the compiler issues several k-steps' operand loads at once and the wider
  // kernels spill on RDNA's 256 VGPRs a lane (tools/audit/amd measures it).
#pragma unroll 1
  for (int k0 = 0; k0 < k; k0 += kFrag) {
    FragA<T> a[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) load_a<T>(a[m], x + m * kFrag * ldx + k0, ldx);
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      FragB<T> b;
      load_b_from_weights<T>(b, w + n * kFrag * ldw + k0, ldw);
#pragma unroll
      for (int m = 0; m < MT; ++m) mma<T>(acc[m][n], a[m], b);
    }
  }
}

// acc[m][n] += X[16 m .., 0 .. k) * W[0 .. k, 16 n ..) for m < MT, n < NB: the backward product
// dY_prev = dZ * W, with W (out x in, row stride ldw) as stored, k running over its rows (the
// layer's outputs). x is the wave's LDS rows (row stride ldx), w points at W[k0 = 0][first input
// column]. k is a multiple of 16.
template <typename T, int MT, int NB>
__device__ __forceinline__ void product_untransposed(FragAcc (&acc)[MT][NB], const T* x, int ldx, const T* w, int ldw,
                                                     int k) {
  // Rolled: unrolled, the compiler issues several k-steps' operand loads at once and the wider
  // kernels spill on RDNA's 256 VGPRs a lane (tools/audit/amd measures it).
#pragma unroll 1
  for (int k0 = 0; k0 < k; k0 += kFrag) {
    FragA<T> a[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) load_a<T>(a[m], x + m * kFrag * ldx + k0, ldx);
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      FragBRow<T> b;
      load_b_row_major<T>(b, w + k0 * ldw + n * kFrag, ldw);
#pragma unroll
      for (int m = 0; m < MT; ++m) mma<T>(acc[m][n], a[m], b);
    }
  }
}

template <int MT, int NB>
__device__ __forceinline__ void zero(FragAcc (&acc)[MT][NB]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NB; ++n) zero(acc[m][n]);
}

}  // namespace tinyfuse::cuda::fused
