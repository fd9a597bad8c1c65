// The per-element formulas of the losses, shared by the CPU and GPU backends.
#pragma once

#include <cmath>

#include "core/loss_config.h"

#ifndef TF_HOST_DEVICE
#if defined(__CUDACC__) || defined(__HIPCC__)
#define TF_HOST_DEVICE __host__ __device__
#else
#define TF_HOST_DEVICE
#endif
#endif

namespace tinyfuse {

// x / n from inv_n = 1 / n (rounded), rounded exactly as the division rounds it, wherever
// divide_by_reciprocal_safe(x) holds (n >= 1 and below 2^40): Markstein's correction step (q =
// x inv_n is within an ulp of x / n, the FMA residual x - q n is exact, and one more FMA rounds
// correctly). For dividing many values by one n (a loss's batch x dims) without the division's
// range checks and slow-path branch per element; callers divide one by one where it is false
// (zero, huge or tiny values, Inf, NaN). tests/cpu/test_losses.cpp checks the equality.
TF_HOST_DEVICE inline bool divide_by_reciprocal_safe(float x) {
  const float ax = x < 0.0f ? -x : x;
  return ax >= 0x1p-60f && ax < 0x1p+60f;
}
TF_HOST_DEVICE inline float divide_by_reciprocal(float x, float n, float inv_n) {
  const float q = x * inv_n;
  return fmaf(fmaf(-q, n, x), inv_n, q);
}

// Per-element value and gradient of one loss, before division by the element count and before
// loss scaling. Denominators of the relative losses are held constant in the gradient, as
// tiny-cuda-nn does (they are a normalisation, not part of the objective's shape).
template <typename T>
struct LossTerm {
  T value, gradient;
};

// p: prediction, t: target, pdf: the sample's data pdf (1 without one), luminance: the sample's
// predicted luminance (only read by RelativeL2Luminance, see loss_luminance()).
template <typename T>
TF_HOST_DEVICE inline LossTerm<T> loss_term(LossKind kind, T p, T t, T pdf, T luminance) {
  using std::abs;
  using std::copysign;
  using std::log;
  const T diff = p - t;
  switch (kind) {
    case LossKind::L2: return {diff * diff / pdf, T(2) * diff / pdf};
    case LossKind::L1: return {abs(diff) / pdf, copysign(T(1), diff) / pdf};
    case LossKind::RelativeL2: {
      T s = T(1) / (p * p + T(0.01)) / pdf;
      return {diff * diff * s, T(2) * diff * s};
    }
    case LossKind::RelativeL2Luminance: {
      T s = T(1) / (luminance * luminance + T(0.01)) / pdf;
      return {diff * diff * s, T(2) * diff * s};
    }
    case LossKind::RelativeL1: {
      T s = T(1) / (abs(p) + T(0.01)) / pdf;
      return {abs(diff) * s, copysign(s, diff)};
    }
    case LossKind::MAPE: {
      T s = T(1) / (abs(t) + T(0.01)) / pdf;
      return {abs(diff) * s, copysign(s, diff)};
    }
    case LossKind::SMAPE: {
      T s = T(1) / (T(0.5) * (abs(t) + abs(p)) + T(0.01)) / pdf;
      return {abs(diff) * s, copysign(s, diff)};
    }
    case LossKind::CrossEntropy: {
      // -t log p, for p a probability the network outputs (e.g. after a Sigmoid).
      T f = -t / pdf;
      return {f * log(p), f / p};
    }
    case LossKind::Variance: {
      // t^2/pdf * (1/p - 1/pdf): the variance of a Monte Carlo estimate when sampling with density p.
      T f = t * t / pdf;
      return {f / p - f / pdf, -f / (p * p)};
    }
  }
  return {T(0), T(0)};
}

// The luminance RelativeL2Luminance normalises by, from the predicted RGB of a sample. With at
// least 6 output dims, callers pass the sums of the two RGB triples (dims 0-2 and 3-5).
template <typename T>
TF_HOST_DEVICE inline T loss_luminance(T r, T g, T b) {
  return T(0.299) * r + T(0.587) * g + T(0.114) * b;
}

}  // namespace tinyfuse
