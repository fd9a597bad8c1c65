// The two warp-level products the mma.sync kernels build their layers from, with the weights in
// shared memory in the forward layout (out x in, row stride in + kSmemPad) and the other operand
// in A fragments (rows x 16 per k-step, the accumulator layout of the layer before):
//   times_weights_transposed: acc += A * W^T  (the forward direction: k = in, n = out)
//   times_weights:            acc += A * W    (the backward direction: k = out, n = in; W read as
//                                              8x8 blocks transposed by ldmatrix .trans)
// Each call covers 16 * N_PAIRS output columns starting at n0.
#pragma once

#include "cuda/fused/kernel_common.cuh"
#include "cuda/primitives/mma.cuh"

namespace tinyfuse::cuda::fused {

#if !defined(TINYFUSE_WITH_HIP)

// acc (rows x 16 * N_PAIRS) += a[., ks] (rows x 16, k-steps [0, KS)) * W[n0 .., 16 ks ..]^T.
template <typename T, int MT, int KS, int N_PAIRS>
__device__ __forceinline__ void times_weights_transposed(float (&acc)[MT][2 * N_PAIRS][4], const uint32_t (&a)[MT][KS][4],
                                                         const T* w, int stride, int n0) {
  const int lane = threadIdx.x % kWarpSize, q = lane / 8, r = lane % 8;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int j = 0; j < N_PAIRS; ++j) {
      uint32_t b[4];
      ptx::ldmatrix_x4(b, ptx::shared_address(w + (n0 + 16 * j + (q / 2) * 8 + r) * stride + 16 * ks + (q % 2) * 8));
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        mma_16816<T>(acc[m][2 * j], a[m][ks], b[0], b[1]);
        mma_16816<T>(acc[m][2 * j + 1], a[m][ks], b[2], b[3]);
      }
    }
}

// acc (rows x 16 * N_PAIRS) += a[., ks] (rows x 16, one k-step) * W[k0 .. k0 + 15][n0 ..].
template <typename T, int MT, int KS, int N_PAIRS>
__device__ __forceinline__ void times_weights(float (&acc)[MT][2 * N_PAIRS][4], const uint32_t (&a)[MT][KS][4], int ks,
                                              const T* w, int stride, int k0, int n0) {
  const int lane = threadIdx.x % kWarpSize, q = lane / 8, r = lane % 8;
#pragma unroll
  for (int j = 0; j < N_PAIRS; ++j) {
    uint32_t b[4];
    ptx::ldmatrix_x4_trans(b, ptx::shared_address(w + (k0 + (q % 2) * 8 + r) * stride + n0 + 16 * j + (q / 2) * 8));
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      mma_16816<T>(acc[m][2 * j], a[m][ks], b[0], b[1]);
      mma_16816<T>(acc[m][2 * j + 1], a[m][ks], b[2], b[3]);
    }
  }
}

template <int MT, int NT>
__device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.0f;
}

#endif  // !TINYFUSE_WITH_HIP

}  // namespace tinyfuse::cuda::fused
