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
// The Generic epilogue on a whole block of accumulators (flat, as the wgmma kernels hold them, or
// [M][N][4], as the mma.sync kernels do), in place: round_each gives z = round(acc), activate_each
// y = act(z) with the switch over act taken once for the block. The values of activate(act, x)
// element by element, but one copy of each activation's code per call site instead of one per
// element: a block of 64 elements with ten activations inlined at each made the Generic kernels
// ten times the others in code and compile time. (Written on the arrays' own shapes: a cast to
// another array type kept them in local memory.)
template <typename T, int K>
__device__ __forceinline__ void round_each(float (&v)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) v[i] = round_to<T>(v[i]);
}
template <typename T, int M, int N>
__device__ __forceinline__ void round_each(float (&v)[M][N][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) v[m][n][i] = round_to<T>(v[m][n][i]);
}

template <Activation A, int K>
__device__ __forceinline__ void activate_block(float (&v)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) v[i] = activate(A, v[i]);
}
template <Activation A, int M, int N>
__device__ __forceinline__ void activate_block(float (&v)[M][N][4]) {
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) v[m][n][i] = activate(A, v[m][n][i]);
}
template <Activation A, int N>
__device__ __forceinline__ void activate_block(float (&v)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) v[n][i] = activate(A, v[n][i]);
}
template <typename Block>
__device__ __forceinline__ void activate_each(Activation act, Block& v) {
  switch (act) {
    case Activation::None: return;
    case Activation::ReLU: return activate_block<Activation::ReLU>(v);
    case Activation::LeakyReLU: return activate_block<Activation::LeakyReLU>(v);
    case Activation::SiLU: return activate_block<Activation::SiLU>(v);
    case Activation::Exponential: return activate_block<Activation::Exponential>(v);
    case Activation::Sine: return activate_block<Activation::Sine>(v);
    case Activation::Sigmoid: return activate_block<Activation::Sigmoid>(v);
    case Activation::Squareplus: return activate_block<Activation::Squareplus>(v);
    case Activation::Softplus: return activate_block<Activation::Softplus>(v);
    case Activation::Tanh: return activate_block<Activation::Tanh>(v);
  }
}

// The epilogue E of a whole block before packing: Generic rounds and activates in place
// (finish_pair<T, finished(E)> then packs, rounding exactly again); Relu and Identity are left to
// finish_pair.
template <typename T, Epilogue E, int K>
__device__ __forceinline__ void finish_block(float (&v)[K], Activation act) {
  if constexpr (E == Epilogue::Generic) {
    round_each<T>(v);
    activate_each(act, v);
  }
}
// [M][N][4]: one switch per 16-row tile, which keeps a case's live values within every kernel's
// register budget (one switch over the whole block spilled the kernels that keep z).
template <typename T, Epilogue E, int M, int N>
__device__ __forceinline__ void finish_block(float (&v)[M][N][4], Activation act) {
  if constexpr (E == Epilogue::Generic) {
    round_each<T>(v);
#pragma unroll
    for (int m = 0; m < M; ++m) activate_each(act, v[m]);
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
// backward both call it.
template <typename T>
__device__ __forceinline__ uint32_t dz_pair(float dy0, float dy1, Activation act, uint32_t saved, bool saved_is_y) {
  if (act == Activation::None) return pack2<T>(dy0, dy1);
  const float2 v = unpack2<T>(saved);
  return pack2<T>(dy0 * derivative_from_saved(act, v.x, saved_is_y), dy1 * derivative_from_saved(act, v.y, saved_is_y));
}

}  // namespace tinyfuse::cuda::fused
