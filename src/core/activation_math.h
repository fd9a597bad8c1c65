// The activation functions and their derivatives, shared by the CPU and GPU backends.
// Definitions follow tiny-cuda-nn: LeakyReLU slope 0.01; Squareplus and Softplus are sharpened
// by K_ACT = 10 (squareplus(10x)/10, log(1 + exp(10x))/10); SiLU is x * sigmoid(x).
// Derivatives (first and second) are taken from the pre-activation value z, which every backend
// keeps.
#pragma once

#include <cmath>

#include "tinyfuse/activation.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TF_HOST_DEVICE __host__ __device__
#else
#define TF_HOST_DEVICE
#endif

namespace tinyfuse {

constexpr float kActivationSharpness = 10.0f;  // tiny-cuda-nn's K_ACT
constexpr float kLeakyReluSlope = 0.01f;

template <typename T>
TF_HOST_DEVICE inline T activate(Activation a, T z) {
  using std::exp;
  using std::log;
  using std::sin;
  using std::sqrt;
  using std::tanh;
  const T k = T(kActivationSharpness);
  switch (a) {
    case Activation::None: return z;
    case Activation::ReLU: return z > T(0) ? z : T(0);
    case Activation::LeakyReLU: return z > T(0) ? z : T(kLeakyReluSlope) * z;
    case Activation::SiLU: return z / (T(1) + exp(-z));
    case Activation::Exponential: return exp(z);
    case Activation::Sine: return sin(z);
    case Activation::Sigmoid: return T(1) / (T(1) + exp(-z));
    case Activation::Squareplus: {
      T x = k * z;
      return T(0.5) * (x + sqrt(x * x + T(4))) / k;
    }
    case Activation::Softplus: {
      // log(1 + exp(kz)) / k, written to stay finite for large |kz|.
      T x = k * z;
      return (x > T(0) ? x + log(T(1) + exp(-x)) : log(T(1) + exp(x))) / k;
    }
    case Activation::Tanh: return tanh(z);
  }
  return z;
}

// d activate(a, z) / dz.
template <typename T>
TF_HOST_DEVICE inline T activate_derivative(Activation a, T z) {
  using std::cos;
  using std::exp;
  using std::sqrt;
  using std::tanh;
  const T k = T(kActivationSharpness);
  switch (a) {
    case Activation::None: return T(1);
    case Activation::ReLU: return z > T(0) ? T(1) : T(0);
    case Activation::LeakyReLU: return z > T(0) ? T(1) : T(kLeakyReluSlope);
    case Activation::SiLU: {
      T s = T(1) / (T(1) + exp(-z));
      return s * (T(1) + z * (T(1) - s));
    }
    case Activation::Exponential: return exp(z);
    case Activation::Sine: return cos(z);
    case Activation::Sigmoid: {
      T s = T(1) / (T(1) + exp(-z));
      return s * (T(1) - s);
    }
    case Activation::Squareplus: {
      T x = k * z;
      return T(0.5) * (T(1) + x / sqrt(x * x + T(4)));
    }
    case Activation::Softplus: return T(1) / (T(1) + exp(-k * z));
    case Activation::Tanh: {
      T t = tanh(z);
      return T(1) - t * t;
    }
  }
  return T(1);
}

// Whether activate_second_derivative(a, .) is 0 wherever it is defined (piecewise-linear
// activations): second-order passes skip the terms it multiplies.
TF_HOST_DEVICE inline bool activation_is_piecewise_linear(Activation a) {
  return a == Activation::None || a == Activation::ReLU || a == Activation::LeakyReLU;
}

// d^2 activate(a, z) / dz^2. ReLU and LeakyReLU have 0 almost everywhere (their kink is a set
// of measure zero, ignored as every framework does).
template <typename T>
TF_HOST_DEVICE inline T activate_second_derivative(Activation a, T z) {
  using std::exp;
  using std::sin;
  using std::sqrt;
  using std::tanh;
  const T k = T(kActivationSharpness);
  switch (a) {
    case Activation::None:
    case Activation::ReLU:
    case Activation::LeakyReLU: return T(0);
    case Activation::SiLU: {
      // (z s)'' = s (1 - s) (2 + z (1 - 2 s))
      T s = T(1) / (T(1) + exp(-z));
      return s * (T(1) - s) * (T(2) + z * (T(1) - T(2) * s));
    }
    case Activation::Exponential: return exp(z);
    case Activation::Sine: return -sin(z);
    case Activation::Sigmoid: {
      T s = T(1) / (T(1) + exp(-z));
      return s * (T(1) - s) * (T(1) - T(2) * s);
    }
    case Activation::Squareplus: {
      // d/dz of 0.5 (1 + x / sqrt(x^2 + 4)), x = kz: 2k / (x^2 + 4)^(3/2)
      T x = k * z;
      T r = x * x + T(4);
      return T(2) * k / (r * sqrt(r));
    }
    case Activation::Softplus: {
      T s = T(1) / (T(1) + exp(-k * z));
      return k * s * (T(1) - s);
    }
    case Activation::Tanh: {
      T t = tanh(z);
      return T(-2) * t * (T(1) - t * t);
    }
  }
  return T(0);
}

}  // namespace tinyfuse
