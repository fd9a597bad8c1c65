// tiny-cuda-nn's OneBlob encoding, one input value at a time: n_bins features holding how much
// of a quartic kernel of radius 1/n_bins centred on x falls into each bin [k/n, (k+1)/n) of
// [0, 1). The domain wraps around (the kernel is also placed at x - 1 and x + 1), so inputs are
// meant to lie in [0, 1] and the features of one input sum to 1 there.
//
// Kernel (Epanechnikov-like quartic, u = t * n_bins):
//   pdf(t) = n_bins * 15/16 * max(1 - u^2, 0)^2
//   cdf(t) = clamp(15/16 * u * (1 - 2/3 u^2 + 1/5 u^4) + 1/2, 0, 1)
// feature k = C((k+1)/n) - C(k/n) with C(b) = sum over s in {-1, 0, 1} of cdf(b - x + s).
// `out` and `dL_dout` are pointers or anything indexed like them (the GPU kernels pass
// accessors that convert to and from half precision).
#pragma once

#include <cstdint>

#include "core/activation_math.h"  // TF_HOST_DEVICE

namespace tinyfuse {

template <typename T>
TF_HOST_DEVICE inline T quartic_cdf(T t, T inv_radius) {
  const T u = t * inv_radius;
  const T u2 = u * u;
  const T v = T(15) / T(16) * u * (T(1) - T(2) / T(3) * u2 + T(1) / T(5) * u2 * u2) + T(0.5);
  return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
}

// d cdf(t) / dt.
template <typename T>
TF_HOST_DEVICE inline T quartic_pdf(T t, T inv_radius) {
  const T u = t * inv_radius;
  const T w = T(1) - u * u;
  return w > T(0) ? T(15) / T(16) * w * w * inv_radius : T(0);
}

// d pdf(t) / dt = -15/4 u (1 - u^2) inv_radius^2 inside the kernel, 0 outside (continuous at |u| = 1).
template <typename T>
TF_HOST_DEVICE inline T quartic_pdf_derivative(T t, T inv_radius) {
  const T u = t * inv_radius;
  const T w = T(1) - u * u;
  return w > T(0) ? T(-15) / T(4) * u * w * inv_radius * inv_radius : T(0);
}

// Bin boundary k, k / n, as the CUDA kernels that evaluate a few boundaries each compute it: where
// n is a power of two, `inv_bins` is 1 / n (exact) and k * inv_bins is k / n without a division;
// otherwise inv_bins is 0 and they divide. Both give the same bits.
TF_HOST_DEVICE inline float oneblob_boundary(int k, float n, float inv_bins) {
  return inv_bins != 0.0f ? static_cast<float>(k) * inv_bins : static_cast<float>(k) / n;
}
// inv_bins for oneblob_boundary: 1 / n_bins where that is exact, else 0.
inline float oneblob_inv_bins(uint32_t n_bins) {
  return n_bins > 0 && (n_bins & (n_bins - 1)) == 0 ? 1.0f / static_cast<float>(n_bins) : 0.0f;
}

// Wrapped CDF at bin boundary b of the kernel centred on x.
template <typename T>
TF_HOST_DEVICE inline T oneblob_wrapped_cdf(T b, T x, T inv_radius) {
  const T t = b - x;
  return quartic_cdf(t - T(1), inv_radius) + quartic_cdf(t, inv_radius) + quartic_cdf(t + T(1), inv_radius);
}

template <typename T>
TF_HOST_DEVICE inline T oneblob_wrapped_pdf(T b, T x, T inv_radius) {
  const T t = b - x;
  return quartic_pdf(t - T(1), inv_radius) + quartic_pdf(t, inv_radius) + quartic_pdf(t + T(1), inv_radius);
}

// oneblob_wrapped_cdf(oneblob_boundary(k, n, inv_bins), x, n) for a boundary k within four bins of
// copy c of the kernel (c = 0: the kernel at x; +1: at x + 1; -1: at x - 1), x in [0, 1], n >= 8:
// there the other two copies' terms are exactly 0 or 1 (their |u| >= n - 4 >= 4, where the
// quartic's CDF is clamped), so only copy c's is evaluated and the three are added in
// oneblob_wrapped_cdf's order: its bits with a third of its work (the fused OneBlob inference
// kernel's windows; tests/cpu/test_encodings.cpp checks the claim).
// Without branches (c may differ between the lanes of a warp): t + (-c) is t - c exactly.
TF_HOST_DEVICE inline float oneblob_window_cdf(int k, float x, float n, float inv_bins, int c) {
  const float t = oneblob_boundary(k, n, inv_bins) - x;
  const float q = quartic_cdf(t + static_cast<float>(-c), n);
  const float t1 = c > 0 ? q : 0.0f;                      // copy at x + 1: quartic_cdf(t - 1)
  const float t2 = c == 0 ? q : (c > 0 ? 1.0f : 0.0f);    // the kernel at x: quartic_cdf(t)
  const float t3 = c < 0 ? q : 1.0f;                      // copy at x - 1: quartic_cdf(t + 1)
  return (t1 + t2) + t3;
}

// Features [k0, k0 + kCount) of x into out (a fixed count, so that out stays in registers) with
// oneblob_encode's expressions (its first boundary is the one the whole loop reaches it with,
// T(k0) / n); those past n_bins are computed and meaningless.
template <uint32_t kCount, typename T>
TF_HOST_DEVICE inline void oneblob_encode_chunk(uint32_t n_bins, T x, uint32_t k0, T (&out)[kCount]) {
  const T n = T(n_bins);
  T left = oneblob_wrapped_cdf(T(k0) / n, x, n);
  for (uint32_t j = 0; j < kCount; ++j) {
    const T right = oneblob_wrapped_cdf(T(k0 + j + 1) / n, x, n);
    out[j] = right - left;
    left = right;
  }
}

// Writes the n_bins features of x to out[0 .. n_bins).
template <typename T, typename Out>
TF_HOST_DEVICE inline void oneblob_encode(uint32_t n_bins, T x, Out out) {
  const T n = T(n_bins);
  T left = oneblob_wrapped_cdf(T(0), x, n);
  for (uint32_t k = 0; k < n_bins; ++k) {
    const T right = oneblob_wrapped_cdf(T(k + 1) / n, x, n);
    out[k] = right - left;
    left = right;
  }
}

// dL/dx given dL/d(features): d feature_k / dx = pdf(k/n - x) - pdf((k+1)/n - x) (wrapped).
template <typename T, typename In>
TF_HOST_DEVICE inline T oneblob_backward(uint32_t n_bins, T x, In dL_dout) {
  const T n = T(n_bins);
  T left = oneblob_wrapped_pdf(T(0), x, n);
  T result = T(0);
  for (uint32_t k = 0; k < n_bins; ++k) {
    const T right = oneblob_wrapped_pdf(T(k + 1) / n, x, n);
    result += dL_dout[k] * (left - right);
    left = right;
  }
  return result;
}

template <typename T>
TF_HOST_DEVICE inline T oneblob_wrapped_pdf_derivative(T b, T x, T inv_radius) {
  const T t = b - x;
  return quartic_pdf_derivative(t - T(1), inv_radius) + quartic_pdf_derivative(t, inv_radius) +
         quartic_pdf_derivative(t + T(1), inv_radius);
}

// Second order: v * d features / dx, the n_bins values dL2/d(dL/dfeatures) given v = dL2/d(dL/dx).
template <typename T, typename Out>
TF_HOST_DEVICE inline void oneblob_jacobian(uint32_t n_bins, T x, T v, Out out) {
  const T n = T(n_bins);
  T left = oneblob_wrapped_pdf(T(0), x, n);
  for (uint32_t k = 0; k < n_bins; ++k) {
    const T right = oneblob_wrapped_pdf(T(k + 1) / n, x, n);
    out[k] = v * (left - right);
    left = right;
  }
}

// d oneblob_backward(n, x, dL_dout) / dx: d/dx pdf(b - x) = -pdf'(b - x), so each bin gives
// pdf'((k+1)/n - x) - pdf'(k/n - x).
template <typename T, typename In>
TF_HOST_DEVICE inline T oneblob_backward_derivative(uint32_t n_bins, T x, In dL_dout) {
  const T n = T(n_bins);
  T left = oneblob_wrapped_pdf_derivative(T(0), x, n);
  T result = T(0);
  for (uint32_t k = 0; k < n_bins; ++k) {
    const T right = oneblob_wrapped_pdf_derivative(T(k + 1) / n, x, n);
    result += dL_dout[k] * (right - left);
    left = right;
  }
  return result;
}

}  // namespace tinyfuse
