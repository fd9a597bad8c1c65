// How the pipelined kernels (pipelined/forward_kernel.cuh: mma.sync; wgmma_kernel.cuh: Hopper warpgroup
// products) turn a layer's FP32 accumulators into the values launch.h's semantics store: the same
// rounding points as fused_forward_kernel, so every kernel gives the same values bit for bit.
#pragma once

#include <cstdint>

#include "cuda/fused/kernel_common.cuh"
#include "cuda/primitives/mma.cuh"

namespace tinyfuse::cuda::fused {

enum class Epilogue {
  Relu,      // round(max(z, 0)): equal to act(round(z)) for ReLU, including NaN -> 0 and -0 -> +0
  Identity,  // round(z)
  Generic,   // round(act(round(z))), act chosen at run time; the only one that can also give z
};

// Two adjacent accumulators (one fragment register's pair) finished and packed.
template <typename T, Epilogue E>
__device__ __forceinline__ uint32_t finish_pair(float lo, float hi, Activation act) {
  if constexpr (E == Epilogue::Relu) {
    return pack2<T>(lo > 0.0f ? lo : 0.0f, hi > 0.0f ? hi : 0.0f);
  } else if constexpr (E == Epilogue::Identity) {
    return pack2<T>(lo, hi);
  } else {
    return pack2<T>(activate(act, round_to<T>(lo)), activate(act, round_to<T>(hi)));
  }
}
// z = round(acc), as fused_forward_kernel stores it.
template <typename T>
__device__ __forceinline__ uint32_t z_pair(float lo, float hi) {
  return pack2<T>(round_to<T>(lo), round_to<T>(hi));
}

// The backward's dZ = round(dY * act'(saved)) for one fragment register (two elements of one
// row), dY given as two floats already rounded to T; fused_backward_kernel and the streaming
// backward both call it.
template <typename T>
__device__ __forceinline__ uint32_t dz_pair(float dy0, float dy1, Activation act, uint32_t saved, bool saved_is_y) {
  if (act == Activation::None) return pack2<T>(dy0, dy1);
  const float2 v = unpack2<T>(saved);
  return pack2<T>(dy0 * derivative_from_saved(act, v.x, saved_is_y), dy1 * derivative_from_saved(act, v.y, saved_is_y));
}

}  // namespace tinyfuse::cuda::fused
