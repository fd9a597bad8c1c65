// How the fused kernels compute an activation chosen at run time (Epilogue::Generic, the general
// kernels, the backward's derivative): None and ReLU inline, every other activation in one
// out-of-line function per kernel, called on a few elements at a time. The one place that decides
// it, and how many elements each call site passes.
//
// Why out of line: fused_activate() and fused_activate_derivative() (fused_activation_math.cuh)
// switch over ten activations, tens of instructions each once inlined (Sine's range reduction,
// the exp and log of the smooth ones). A lane holds 64-128 accumulator elements per layer, so
// inlining the switch at every element made ~90% of the fused kernels' machine code and most of
// the CUDA backend's compile time. A call costs a few moves and a branch per block of elements.
// Why None and ReLU inline: one instruction each, and the common cases (identity outputs, ReLU
// hidden layers on the general kernels and under a non-identity output); a call in their path
// would cost more than the activation.
//
// The values are those of fused_activate() / derivative_from_saved() element by element, as
// inlined: the same operations on each element, and no a*b+c can be contracted across the call
// (its argument is a rounded z or a saved value, its result is rounded to T or multiplied by dY
// and rounded).
#pragma once

#include "cuda/fused/kernel_common.cuh"

namespace tinyfuse::cuda::fused {

// Elements per out-of-line call, per call site: more elements, fewer calls, but more values live
// across each call. Each is the largest that keeps every kernel free of spills (sm_75/80/90;
// scripts/audit.sh checks it).
constexpr int kBlockActivationCall = 8;    // whole blocks finished in place (pipelined inference, Hopper)
// fused_forward_kernel: at 32 wide some size spills on each architecture (1: sm_80 BF16; 2: sm_90;
// 4: sm_80), so it is chosen per architecture.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr int kGeneralActivationCall = 4;
#else
constexpr int kGeneralActivationCall = 2;
#endif
constexpr int kDerivativeCall = 2;         // dz_pair: the backward's act'(saved), one register's pair
constexpr int kPassDerivativeCall = 8;     // the pipelined backward's hidden layers, in dz_pair's order
// The pipelined training forward, which also keeps z: at 16 and 32 wide it stores z first and
// then finishes the accumulators in place as inference does (kBlockActivationCall per call; pairs
// in the original order spill there); at 64 and 128 wide that order spills, so y is formed pair
// by pair (finish_pair, one call per pair) and z after.
template <int WIDTH>
constexpr bool kKeepZFirst = WIDTH <= 32;

template <int N>
struct Floats {
  float v[N];
};

template <Activation A, int N>
__device__ __forceinline__ void activate_floats(Floats<N>& x) {
#pragma unroll
  for (int i = 0; i < N; ++i) x.v[i] = fused_activate(A, x.v[i]);
}

// act(x) element by element: one copy per kernel and block size; the switch is taken once per call.
template <int N>
__device__ __noinline__ Floats<N> activate_out_of_line(Activation act, Floats<N> x) {
  switch (act) {
    case Activation::None: break;
    case Activation::ReLU: activate_floats<Activation::ReLU>(x); break;
    case Activation::LeakyReLU: activate_floats<Activation::LeakyReLU>(x); break;
    case Activation::SiLU: activate_floats<Activation::SiLU>(x); break;
    case Activation::Exponential: activate_floats<Activation::Exponential>(x); break;
    case Activation::Sine: activate_floats<Activation::Sine>(x); break;
    case Activation::Sigmoid: activate_floats<Activation::Sigmoid>(x); break;
    case Activation::Squareplus: activate_floats<Activation::Squareplus>(x); break;
    case Activation::Softplus: activate_floats<Activation::Softplus>(x); break;
    case Activation::Tanh: activate_floats<Activation::Tanh>(x); break;
  }
  return x;
}

template <Activation A, int N>
__device__ __forceinline__ void derivative_floats(Floats<N>& x, bool saved_is_y) {
#pragma unroll
  for (int i = 0; i < N; ++i) x.v[i] = derivative_from_saved(A, x.v[i], saved_is_y);
}

// act'(saved) element by element (derivative_from_saved), out of line as activate_out_of_line.
template <int N>
__device__ __noinline__ Floats<N> derivative_out_of_line(Activation act, Floats<N> x, bool saved_is_y) {
  switch (act) {
    case Activation::None: derivative_floats<Activation::None>(x, saved_is_y); break;
    case Activation::ReLU: derivative_floats<Activation::ReLU>(x, saved_is_y); break;
    case Activation::LeakyReLU: derivative_floats<Activation::LeakyReLU>(x, saved_is_y); break;
    case Activation::SiLU: derivative_floats<Activation::SiLU>(x, saved_is_y); break;
    case Activation::Exponential: derivative_floats<Activation::Exponential>(x, saved_is_y); break;
    case Activation::Sine: derivative_floats<Activation::Sine>(x, saved_is_y); break;
    case Activation::Sigmoid: derivative_floats<Activation::Sigmoid>(x, saved_is_y); break;
    case Activation::Squareplus: derivative_floats<Activation::Squareplus>(x, saved_is_y); break;
    case Activation::Softplus: derivative_floats<Activation::Softplus>(x, saved_is_y); break;
    case Activation::Tanh: derivative_floats<Activation::Tanh>(x, saved_is_y); break;
  }
  return x;
}

// store(i, act(load(i))) for i = 0 .. N - 1 in order: None and ReLU inline, the others B elements
// per call (load, then the call, then store, block by block).
template <int B, int N, typename Load, typename Store>
__device__ __forceinline__ void activate_run_time(Activation act, Load&& load, Store&& store) {
  static_assert(N % B == 0, "whole calls");
  if (act == Activation::None) {
#pragma unroll
    for (int i = 0; i < N; ++i) store(i, load(i));
  } else if (act == Activation::ReLU) {
#pragma unroll
    for (int i = 0; i < N; ++i) store(i, fused_activate(Activation::ReLU, load(i)));
  } else {
#pragma unroll
    for (int j = 0; j < N; j += B) {
      Floats<B> f;
#pragma unroll
      for (int i = 0; i < B; ++i) f.v[i] = load(j + i);
      f = activate_out_of_line<B>(act, f);
#pragma unroll
      for (int i = 0; i < B; ++i) store(j + i, f.v[i]);
    }
  }
}
// The same in place on the elements x(i) (a float&).
template <int B, int N, typename Element>
__device__ __forceinline__ void activate_run_time(Activation act, Element&& x) {
  activate_run_time<B, N>(act, [&](int i) { return x(i); }, [&](int i, float y) { x(i) = y; });
}

// act(z), act'(z) and act''(z) of N pre-activations at once (the second-order kernel's forward,
// which keeps the derivatives for its later sweeps): out of line for every activation but None
// and ReLU, as activate_out_of_line. Returns {act(z_i)..., act'(z_i)..., act''(z_i)...}.
template <int N>
__device__ __noinline__ Floats<3 * N> activation_derivatives_out_of_line(Activation act, Floats<N> z) {
  Floats<3 * N> d;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    d.v[i] = fused_activate(act, z.v[i]);
    d.v[N + i] = fused_activate_derivative(act, z.v[i]);
    d.v[2 * N + i] = fused_activate_second_derivative(act, z.v[i]);
  }
  return d;
}
template <int N>
__device__ __forceinline__ Floats<3 * N> activation_derivatives(Activation act, const Floats<N>& z) {
  Floats<3 * N> d;
  if (act == Activation::None || act == Activation::ReLU) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const bool pass = act == Activation::None || z.v[i] > 0.0f;
      d.v[i] = act == Activation::None ? z.v[i] : fused_activate(Activation::ReLU, z.v[i]);
      d.v[N + i] = pass ? 1.0f : 0.0f;
      d.v[2 * N + i] = 0.0f;
    }
    return d;
  }
  return activation_derivatives_out_of_line<N>(act, z);
}

// store(i, act'(load(i))) (derivative_from_saved) likewise, ReLU inline; the caller handles None
// (act' = 1, dZ = dY).
template <int B, int N, typename Load, typename Store>
__device__ __forceinline__ void derivative_run_time(Activation act, bool saved_is_y, Load&& load, Store&& store) {
  static_assert(N % B == 0, "whole calls");
  if (act == Activation::ReLU) {
#pragma unroll
    for (int i = 0; i < N; ++i) store(i, derivative_from_saved(Activation::ReLU, load(i), saved_is_y));
  } else {
#pragma unroll
    for (int j = 0; j < N; j += B) {
      Floats<B> f;
#pragma unroll
      for (int i = 0; i < B; ++i) f.v[i] = load(j + i);
      f = derivative_out_of_line<B>(act, f, saved_is_y);
#pragma unroll
      for (int i = 0; i < B; ++i) store(j + i, f.v[i]);
    }
  }
}

}  // namespace tinyfuse::cuda::fused
