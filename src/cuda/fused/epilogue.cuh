// How the pipelined kernels (pipelined/forward_kernel.cuh: mma.sync; wgmma_kernel.cuh: Hopper warpgroup
// products) turn a layer's FP32 accumulators into the values launch.h's semantics store: the same
// rounding points as fused_forward_kernel, so every kernel gives the same values bit for bit.
#pragma once

#include <cstdint>

#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/run_time_activation.cuh"
#include "cuda/primitives/mma.cuh"

namespace tinyfuse::cuda::fused {

enum class Epilogue {
  Relu,      // round(max(z, 0)): equal to act(round(z)) for ReLU, including NaN -> 0 and -0 -> +0
  Identity,  // round(z)
  Generic,   // round(act(round(z))), act chosen at run time; the only one that can also give z
};

// Two adjacent accumulators (one fragment register's pair) finished and packed. Generic: one
// call per pair (run_time_activation.cuh; None and ReLU inline).
template <typename T, Epilogue E>
__device__ __forceinline__ uint32_t finish_pair(float lo, float hi, Activation act) {
  if constexpr (E == Epilogue::Relu) {
    return pack2<T>(lo > 0.0f ? lo : 0.0f, hi > 0.0f ? hi : 0.0f);
  } else if constexpr (E == Epilogue::Identity) {
    return pack2<T>(lo, hi);
  } else {
    float v[2] = {round_to<T>(lo), round_to<T>(hi)};
    activate_run_time<2, 2>(act, [&](int i) -> float& { return v[i]; });
    return pack2<T>(v[0], v[1]);
  }
}
// The Generic epilogue on a whole block of accumulators (flat, as the wgmma kernels hold them, or
// [M][N][4], as the mma.sync kernels do), in place: z = round(acc), then y = act(z) through
// run_time_activation.cuh, kBlockActivationCall elements per call. finish_pair<T, finished(E)>
// then packs (rounding exactly again).
template <typename T, Epilogue E, int K>
__device__ __forceinline__ void finish_block(float (&v)[K], Activation act) {
  if constexpr (E == Epilogue::Generic) {
#pragma unroll
    for (int i = 0; i < K; ++i) v[i] = round_to<T>(v[i]);
    activate_run_time<kBlockActivationCall, K>(act, [&](int i) -> float& { return v[i]; });
  }
}
template <typename T, Epilogue E, int M, int N>
__device__ __forceinline__ void finish_block(float (&v)[M][N][4], Activation act) {
  if constexpr (E == Epilogue::Generic) {
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int n = 0; n < N; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[m][n][i] = round_to<T>(v[m][n][i]);
    activate_run_time<kBlockActivationCall, M * N * 4>(
        act, [&](int e) -> float& { return v[e / (4 * N)][e / 4 % N][e % 4]; });
  }
}
constexpr Epilogue finished(Epilogue e) { return e == Epilogue::Generic ? Epilogue::Identity : e; }

// z = round(acc), as fused_forward_kernel stores it.
template <typename T>
__device__ __forceinline__ uint32_t z_pair(float lo, float hi) {
  return pack2<T>(round_to<T>(lo), round_to<T>(hi));
}

// The backward's dZ = round(dY * act'(saved)) for one fragment register (two elements of one
// row), dY given as two floats already rounded to T; fused_backward_kernel and the streaming
// backward both call it. act' through run_time_activation.cuh (ReLU inline, the others a call).
template <typename T>
__device__ __forceinline__ uint32_t dz_pair(float dy0, float dy1, Activation act, uint32_t saved, bool saved_is_y) {
  if (act == Activation::None) return pack2<T>(dy0, dy1);
  const float2 v = unpack2<T>(saved);
  float d[2];
  derivative_run_time<kDerivativeCall, 2>(
      act, saved_is_y, [&](int i) { return i == 0 ? v.x : v.y; }, [&](int i, float di) { d[i] = di; });
  return pack2<T>(dy0 * d[0], dy1 * d[1]);
}

}  // namespace tinyfuse::cuda::fused
