// tiny-cuda-nn's TriangleWave encoding (the position encoding of neural radiance caching), one
// input value at a time. Feature k = 0 .. n_frequencies-1 of x is a triangle wave in [-1, 1]
// with period 2^(1-k) and a phase shift of k/4 periods:
//   v = 2^(k-1) x + k/4,  feature = 4 |frac(v) - 1/2| - 1
// Its derivative is -2^(k+1) on the falling half (frac(v) < 1/2) and +2^(k+1) on the rising one.
// `out` and `dL_dout` are pointers or anything indexed like them (the GPU kernels pass
// accessors that convert to and from half precision).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/activation_math.h"  // TF_HOST_DEVICE

namespace tinyfuse {

template <typename T>
TF_HOST_DEVICE inline T triangle_wave_phase(T x, uint32_t k) {
  using std::ldexp;
  return ldexp(x, static_cast<int>(k) - 1) + T(0.25) * T(k);
}

// Writes the n_frequencies features of x to out[0 .. n_frequencies).
template <typename T, typename Out>
TF_HOST_DEVICE inline void triangle_wave_encode(uint32_t n_frequencies, T x, Out out) {
  using std::abs;
  using std::floor;
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const T v = triangle_wave_phase(x, k);
    out[k] = abs(v - floor(v) - T(0.5)) * T(4) - T(1);
  }
}

// dL/dx given dL/d(features) of triangle_wave_encode.
template <typename T, typename In>
TF_HOST_DEVICE inline T triangle_wave_backward(uint32_t n_frequencies, T x, In dL_dout) {
  using std::floor;
  using std::ldexp;
  T result = T(0);
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const T v = triangle_wave_phase(x, k);
    const T slope = ldexp(v - floor(v) < T(0.5) ? T(-1) : T(1), static_cast<int>(k) + 1);
    result += dL_dout[k] * slope;
  }
  return result;
}

// Second order: v * d features / dx (the features are piecewise linear, so the derivative of
// triangle_wave_backward with respect to x is 0 almost everywhere and has no function here).
template <typename T, typename Out>
TF_HOST_DEVICE inline void triangle_wave_jacobian(uint32_t n_frequencies, T x, T v, Out out) {
  using std::floor;
  using std::ldexp;
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const T phase = triangle_wave_phase(x, k);
    out[k] = v * ldexp(phase - floor(phase) < T(0.5) ? T(-1) : T(1), static_cast<int>(k) + 1);
  }
}

}  // namespace tinyfuse
