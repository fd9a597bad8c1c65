// The activations as the fused kernels compute them: core/activation_math.h's definitions, with
// exp and log from the special-function unit (__expf, __logf, __fdividef) and the sharpness
// divide as a multiply, for the activations built on them (SiLU, Exponential, Sigmoid, Softplus,
// Squareplus); the others as activation_math.h writes them.
//
// Why: a fused kernel rounds every activation (and act') to FP16 / BF16 right after computing it,
// 11 or 8 significant bits. The library exp, log and divide are within an ulp or two of FP32 at
// about 45 instructions for one Softplus (both branches, the divide's slow-path check); the
// hardware ones are within 2^-21 relative (exp, divide) and 2^-21.4 absolute (log in [1, 2],
// where Softplus takes it) at 13. Softplus hidden layers (W4e) made inference 1.7x slower than
// ReLU ones with the library functions.
// Everything else (the CPU backend, the FP32 GPU kernels, which keep 24 bits) uses
// activation_math.h unchanged. Every fused kernel family calls these, so the families keep
// computing the same bits as each other.
#pragma once

#include "core/activation_math.h"
#include "cuda/common.cuh"  // the device keywords and intrinsics in HIP builds too

namespace tinyfuse::cuda::fused {

#if defined(__CUDACC__) || defined(__HIPCC__)

__device__ __forceinline__ float fused_sigmoid(float z) { return __fdividef(1.0f, 1.0f + __expf(-z)); }

__device__ __forceinline__ float fused_activate(Activation a, float z) {
  constexpr float k = kActivationSharpness, inv_k = 1.0f / kActivationSharpness;
  switch (a) {
    case Activation::SiLU: return z * fused_sigmoid(z);
    case Activation::Exponential: return __expf(z);
    case Activation::Sigmoid: return fused_sigmoid(z);
    case Activation::Squareplus: {
      const float x = k * z;
      return 0.5f * (x + sqrtf(x * x + 4.0f)) * inv_k;
    }
    case Activation::Softplus: {
      // log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)): the log's argument stays in [1, 2].
      const float x = k * z;
      return (fmaxf(x, 0.0f) + __logf(1.0f + __expf(-fabsf(x)))) * inv_k;
    }
    default: return activate(a, z);
  }
}

// d fused_activate(a, z) / dz, as activate_derivative.
__device__ __forceinline__ float fused_activate_derivative(Activation a, float z) {
  constexpr float k = kActivationSharpness;
  switch (a) {
    case Activation::SiLU: {
      const float s = fused_sigmoid(z);
      return s * (1.0f + z * (1.0f - s));
    }
    case Activation::Exponential: return __expf(z);
    case Activation::Sigmoid: {
      const float s = fused_sigmoid(z);
      return s * (1.0f - s);
    }
    case Activation::Softplus: return fused_sigmoid(k * z);
    default: return activate_derivative(a, z);
  }
}

// d^2 fused_activate(a, z) / dz^2, as activate_second_derivative.
__device__ __forceinline__ float fused_activate_second_derivative(Activation a, float z) {
  constexpr float k = kActivationSharpness;
  switch (a) {
    case Activation::SiLU: {
      const float s = fused_sigmoid(z);
      return s * (1.0f - s) * (2.0f + z * (1.0f - 2.0f * s));
    }
    case Activation::Exponential: return __expf(z);
    case Activation::Sigmoid: {
      const float s = fused_sigmoid(z);
      return s * (1.0f - s) * (1.0f - 2.0f * s);
    }
    case Activation::Softplus: {
      const float s = fused_sigmoid(k * z);
      return k * s * (1.0f - s);
    }
    default: return activate_second_derivative(a, z);
  }
}

#endif  // __CUDACC__ || __HIPCC__

}  // namespace tinyfuse::cuda::fused
