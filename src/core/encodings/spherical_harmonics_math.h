// tiny-cuda-nn's SphericalHarmonics encoding: the real spherical harmonics of bands
// l = 0 .. degree-1 (degree^2 features) of a direction (x, y, z).
//
// Ordering and signs follow tiny-cuda-nn: feature l^2 + l + m for m = -l .. l, with the
// Condon-Shortley phase (-1)^m, i.e.
//   Y_l^m = (-1)^|m| K_l^|m| Q_l^|m|(z) A_m(x, y)
//   K_l^m = sqrt((2l+1)/(4 pi) (l-m)!/(l+m)! * (m > 0 ? 2 : 1))
//   Q_l^m(z) = d^m P_l(z) / dz^m     (P_l the Legendre polynomial)
//   A_m = Re((x + iy)^m) for m > 0, Im((x + iy)^|m|) for m < 0, 1 for m = 0
// which is the polynomial form tiny-cuda-nn evaluates: it is not normalised, so directions off
// the unit sphere give the same polynomial's values as in tiny-cuda-nn (Y_1^-1 = -0.4886 y,
// Y_2^0 = 0.9462 z^2 - 0.3154, ...). The encoding maps its inputs from [0, 1] to [-1, 1]
// (x = 2u - 1) before calling these; that mapping lives with the caller.
// `out` and `dL_dout` are pointers or anything indexed like them (the GPU kernels pass
// accessors that convert to and from half precision).
// `degree` is a uint32_t (the CPU) or a std::integral_constant<uint32_t, D> (the GPU kernels, one
// per degree): there every loop bound is a compile-time constant, the loops unroll and the arrays
// below are indexed by constants only, so they stay in registers instead of local / private
// memory. The operations and their order are the same either way.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/activation_math.h"  // TF_HOST_DEVICE

// Device code: full unrolling, and TF_SH_OPAQUE(v), which hands the compiler v as a run-time
// value (an empty asm statement: no instruction). Each entry of the arrays below goes through it
// when written, as it went through memory when the loops were run-time ones: unrolled, entries
// such as q[1][1] = 1 or re[0] = 1 would otherwise be constants, folded away (x * 1 -> x), and
// the fused multiply-adds the compiler forms around them would change, and with them the last
// bit of the results. Host code (degree a run-time value, no contraction): both do nothing.
// (Defined beforehand, both are kept: a host-side emulation of the device build defines them.)
#if !defined(TF_SH_UNROLL)
#if defined(__CUDA_ARCH__)
#define TF_SH_UNROLL _Pragma("unroll")
#define TF_SH_OPAQUE(v) asm("" : "+f"(v))
#elif defined(__HIP_DEVICE_COMPILE__)
#define TF_SH_UNROLL _Pragma("unroll")
#define TF_SH_OPAQUE(v) asm("" : "+v"(v))
#else
#define TF_SH_UNROLL
#define TF_SH_OPAQUE(v) ((void)0)
#endif
#endif

namespace tinyfuse {

constexpr uint32_t kMaxShDegree = 8;

// q[m][l] = Q_l^m(z) for m <= l < degree (from the associated Legendre recurrence, which holds
// for these polynomial parts as for P_l^m); entries with m > l are left unset.
template <typename T, typename Degree>
TF_HOST_DEVICE inline void sh_legendre_parts(Degree degree, T z, T (&q)[kMaxShDegree][kMaxShDegree]) {
  T diagonal = T(1);  // (2m-1)!!
  TF_SH_UNROLL
  for (uint32_t m = 0; m < degree; ++m) {
    if (m > 0) diagonal *= T(2 * m - 1);
    q[m][m] = diagonal;
    TF_SH_OPAQUE(q[m][m]);
    if (m + 1 < degree) {
      q[m][m + 1] = T(2 * m + 1) * z * diagonal;
      TF_SH_OPAQUE(q[m][m + 1]);
    }
    TF_SH_UNROLL
    for (uint32_t l = m + 1; l + 1 < degree; ++l) {
      q[m][l + 1] = (T(2 * l + 1) * z * q[m][l] - T(l + m) * q[m][l - 1]) / T(l - m + 1);
      TF_SH_OPAQUE(q[m][l + 1]);
    }
  }
}

// (-1)^m K_l^m.
template <typename T>
TF_HOST_DEVICE inline T sh_signed_norm(uint32_t l, uint32_t m) {
  using std::sqrt;
  T r = T(2 * l + 1) / (T(4) * T(3.14159265358979323846));
  TF_SH_UNROLL
  for (uint32_t k = l - m + 1; k <= l + m; ++k) r /= T(k);
  if (m > 0) r *= T(2);
  return (m & 1u) ? -sqrt(r) : sqrt(r);
}

// Re and Im of (x + iy)^m for m < degree.
template <typename T, typename Degree>
TF_HOST_DEVICE inline void sh_azimuthal_parts(Degree degree, T x, T y, T (&re)[kMaxShDegree], T (&im)[kMaxShDegree]) {
  re[0] = T(1);
  im[0] = T(0);
  TF_SH_OPAQUE(re[0]);
  TF_SH_OPAQUE(im[0]);
  TF_SH_UNROLL
  for (uint32_t m = 1; m < degree; ++m) {
    re[m] = x * re[m - 1] - y * im[m - 1];
    im[m] = x * im[m - 1] + y * re[m - 1];
    TF_SH_OPAQUE(re[m]);
    TF_SH_OPAQUE(im[m]);
  }
}

// Writes the degree^2 features of direction (x, y, z) to out. degree in [1, kMaxShDegree].
template <typename T, typename Degree, typename Out>
TF_HOST_DEVICE inline void sh_encode(Degree degree, T x, T y, T z, Out out) {
  T q[kMaxShDegree][kMaxShDegree], re[kMaxShDegree], im[kMaxShDegree];
  sh_legendre_parts(degree, z, q);
  sh_azimuthal_parts(degree, x, y, re, im);
  TF_SH_UNROLL
  for (uint32_t l = 0; l < degree; ++l) {
    const uint32_t centre = l * l + l;
    out[centre] = sh_signed_norm<T>(l, 0) * q[0][l];
    TF_SH_UNROLL
    for (uint32_t m = 1; m <= l; ++m) {
      const T radial = sh_signed_norm<T>(l, m) * q[m][l];
      out[centre + m] = radial * re[m];
      out[centre - m] = radial * im[m];
    }
  }
}

// Accumulates dL/d(x, y, z) into grad[0..3) given dL/d(features) of sh_encode.
template <typename T, typename Degree, typename In>
TF_HOST_DEVICE inline void sh_backward(Degree degree, T x, T y, T z, In dL_dout, T* grad) {
  T q[kMaxShDegree][kMaxShDegree], re[kMaxShDegree], im[kMaxShDegree];
  sh_legendre_parts(degree, z, q);
  sh_azimuthal_parts(degree, x, y, re, im);
  T gx = T(0), gy = T(0), gz = T(0);
  TF_SH_UNROLL
  for (uint32_t l = 0; l < degree; ++l) {
    const uint32_t centre = l * l + l;
    // d Q_l^m / dz = Q_l^(m+1), which is 0 for m = l.
    gz += dL_dout[centre] * sh_signed_norm<T>(l, 0) * (l >= 1 ? q[1][l] : T(0));
    TF_SH_UNROLL
    for (uint32_t m = 1; m <= l; ++m) {
      const T norm = sh_signed_norm<T>(l, m);
      const T radial = norm * q[m][l];
      const T dradial_dz = m + 1 <= l ? norm * q[m + 1][l] : T(0);
      const T g_re = dL_dout[centre + m], g_im = dL_dout[centre - m];
      // d(x+iy)^m/dx = m (x+iy)^(m-1); d/dy = i m (x+iy)^(m-1).
      gx += T(m) * radial * (g_re * re[m - 1] + g_im * im[m - 1]);
      gy += T(m) * radial * (-g_re * im[m - 1] + g_im * re[m - 1]);
      gz += dradial_dz * (g_re * re[m] + g_im * im[m]);
    }
  }
  grad[0] += gx;
  grad[1] += gy;
  grad[2] += gz;
}

// Second order. Per band l and order m >= 0 the features are Re and Im of the complex function
// Phi = R(z) w^m (w = x + iy, R = (-1)^m K_l^m Q_l^m; for m = 0 only Re), with
//   Phi_x = R P1, Phi_y = i R P1, Phi_z = R' P0,
//   Phi_xx = R P2, Phi_xy = i R P2, Phi_yy = -R P2, Phi_xz = R' P1, Phi_yz = i R' P1, Phi_zz = R'' P0,
// where P0 = w^m, P1 = m w^(m-1), P2 = m (m-1) w^(m-2), R' = (-1)^m K Q_l^(m+1), R'' = (-1)^m K Q_l^(m+2)
// (0 beyond l). With s = v_x + i v_y, the change along v is J v = R P1 s + R' P0 v_z.

// Writes the degree^2 values J v (dL2/d(dL/dfeatures) given v = dL2/d(dL/d(x, y, z))) to out.
template <typename T, typename Degree, typename Out>
TF_HOST_DEVICE inline void sh_jacobian(Degree degree, T x, T y, T z, const T* v, Out out) {
  T q[kMaxShDegree][kMaxShDegree], re[kMaxShDegree], im[kMaxShDegree];
  sh_legendre_parts(degree, z, q);
  sh_azimuthal_parts(degree, x, y, re, im);
  TF_SH_UNROLL
  for (uint32_t l = 0; l < degree; ++l) {
    const uint32_t centre = l * l + l;
    out[centre] = l >= 1 ? sh_signed_norm<T>(l, 0) * q[1][l] * v[2] : T(0);
    TF_SH_UNROLL
    for (uint32_t m = 1; m <= l; ++m) {
      const T norm = sh_signed_norm<T>(l, m);
      const T r = norm * q[m][l], dr = m + 1 <= l ? norm * q[m + 1][l] : T(0);
      const T p1_re = T(m) * re[m - 1], p1_im = T(m) * im[m - 1];
      // R P1 s + R' P0 v_z
      out[centre + m] = r * (p1_re * v[0] - p1_im * v[1]) + dr * re[m] * v[2];
      out[centre - m] = r * (p1_re * v[1] + p1_im * v[0]) + dr * im[m] * v[2];
    }
  }
}

// Accumulates into grad[0..3) the Hessian of sum_j dL_dout[j] * feature_j at (x, y, z) times v:
// the derivative of sh_backward's dL/d(x, y, z) along v.
template <typename T, typename Degree, typename In>
TF_HOST_DEVICE inline void sh_hessian(Degree degree, T x, T y, T z, In dL_dout, const T* v, T* grad) {
  T q[kMaxShDegree][kMaxShDegree], re[kMaxShDegree], im[kMaxShDegree];
  sh_legendre_parts(degree, z, q);
  sh_azimuthal_parts(degree, x, y, re, im);
  T gx = T(0), gy = T(0), gz = T(0);
  TF_SH_UNROLL
  for (uint32_t l = 0; l < degree; ++l) {
    const uint32_t centre = l * l + l;
    // m = 0: Phi = R(z), only Phi_zz.
    if (l >= 2) gz += dL_dout[centre] * sh_signed_norm<T>(l, 0) * q[2][l] * v[2];
    TF_SH_UNROLL
    for (uint32_t m = 1; m <= l; ++m) {
      const T norm = sh_signed_norm<T>(l, m);
      const T r = norm * q[m][l];
      const T dr = m + 1 <= l ? norm * q[m + 1][l] : T(0);
      const T d2r = m + 2 <= l ? norm * q[m + 2][l] : T(0);
      const T p1_re = T(m) * re[m - 1], p1_im = T(m) * im[m - 1];
      const T p2_re = m >= 2 ? T(m * (m - 1)) * re[m - 2] : T(0), p2_im = m >= 2 ? T(m * (m - 1)) * im[m - 2] : T(0);
      // Q = R P2 s + R' P1 v_z; (H v)_x = Q, (H v)_y = i Q, (H v)_z = R' P1 s + R'' P0 v_z.
      const T q_re = r * (p2_re * v[0] - p2_im * v[1]) + dr * p1_re * v[2];
      const T q_im = r * (p2_re * v[1] + p2_im * v[0]) + dr * p1_im * v[2];
      const T hz_re = dr * (p1_re * v[0] - p1_im * v[1]) + d2r * re[m] * v[2];
      const T hz_im = dr * (p1_re * v[1] + p1_im * v[0]) + d2r * im[m] * v[2];
      // Each feature pair adds Re(conj(g_re + i g_im) * value) = g_re Re + g_im Im.
      const T g_re = dL_dout[centre + m], g_im = dL_dout[centre - m];
      gx += g_re * q_re + g_im * q_im;
      gy += -g_re * q_im + g_im * q_re;  // i Q = -Im Q + i Re Q
      gz += g_re * hz_re + g_im * hz_im;
    }
  }
  grad[0] += gx;
  grad[1] += gy;
  grad[2] += gz;
}

}  // namespace tinyfuse
