// tiny-cuda-nn's Frequency encoding (NeRF's positional encoding), one input value at a time.
// Input value x gives 2 * n_frequencies features, pairs per octave k = 0 .. n_frequencies-1:
//   sin(2^k pi x), cos(2^k pi x)
// (sine first). Shared by the CPU backend and the GPU kernels.
// `out` and `dL_dout` are pointers or anything indexed like them (the GPU kernels pass
// accessors that convert to and from half precision).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/activation_math.h"  // TF_HOST_DEVICE

namespace tinyfuse {

template <typename T>
TF_HOST_DEVICE inline T frequency_pi() {
  return T(3.14159265358979323846);
}

// Writes the 2 * n_frequencies features of x to out[0 .. 2 * n_frequencies).
template <typename T, typename Out>
TF_HOST_DEVICE inline void frequency_encode(uint32_t n_frequencies, T x, Out out) {
  using std::cos;
  using std::ldexp;
  using std::sin;
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const T phase = ldexp(x, static_cast<int>(k)) * frequency_pi<T>();
    out[2 * k] = sin(phase);
    out[2 * k + 1] = cos(phase);
  }
}

// dL/dx given dL/d(features) of frequency_encode.
template <typename T, typename In>
TF_HOST_DEVICE inline T frequency_backward(uint32_t n_frequencies, T x, In dL_dout) {
  using std::cos;
  using std::ldexp;
  using std::sin;
  T result = T(0);
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const T rate = ldexp(frequency_pi<T>(), static_cast<int>(k));  // d(phase)/dx
    const T phase = ldexp(x, static_cast<int>(k)) * frequency_pi<T>();
    result += rate * (dL_dout[2 * k] * cos(phase) - dL_dout[2 * k + 1] * sin(phase));
  }
  return result;
}

// Second order. The features of x change along v (a step in x) by v * d features / dx:
// writes those 2 * n_frequencies values (dL2/d(dL/dfeatures) given v = dL2/d(dL/dx)).
template <typename T, typename Out>
TF_HOST_DEVICE inline void frequency_jacobian(uint32_t n_frequencies, T x, T v, Out out) {
  using std::cos;
  using std::ldexp;
  using std::sin;
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const T rate = ldexp(frequency_pi<T>(), static_cast<int>(k));
    const T phase = ldexp(x, static_cast<int>(k)) * frequency_pi<T>();
    out[2 * k] = v * rate * cos(phase);
    out[2 * k + 1] = -v * rate * sin(phase);
  }
}

// d frequency_backward(n, x, dL_dout) / dx: sum over k of -rate^2 (dL_dout[2k] sin + dL_dout[2k+1] cos).
template <typename T, typename In>
TF_HOST_DEVICE inline T frequency_backward_derivative(uint32_t n_frequencies, T x, In dL_dout) {
  using std::cos;
  using std::ldexp;
  using std::sin;
  T result = T(0);
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const T rate = ldexp(frequency_pi<T>(), static_cast<int>(k));
    const T phase = ldexp(x, static_cast<int>(k)) * frequency_pi<T>();
    result -= rate * rate * (dL_dout[2 * k] * sin(phase) + dL_dout[2 * k + 1] * cos(phase));
  }
  return result;
}

}  // namespace tinyfuse
