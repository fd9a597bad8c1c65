#include "cpu/elementwise.h"

#include "core/activation_math.h"
#include "cpu/isa_clones.h"

// Each entry point is built for AVX-512, AVX2 and the baseline (isa_clones.h).

namespace tinyfuse::cpu {

namespace {

// The activation is a template argument, so that each loop body is one branch-free expression.
template <Activation A, typename T>
TINYFUSE_ALWAYS_INLINE void bias_activate_rows(T* __restrict z, T* __restrict y, const T* __restrict bias, int64_t r0, int64_t r1,
                               uint32_t w) {
  for (int64_t r = r0; r < r1; ++r) {
    T* __restrict zr = z + r * w;
    T* __restrict yr = y + r * w;
    if (bias)
      for (uint32_t o = 0; o < w; ++o) zr[o] += bias[o];
    for (uint32_t o = 0; o < w; ++o) yr[o] = activate(A, zr[o]);
  }
}

template <Activation A, typename T>
TINYFUSE_ALWAYS_INLINE void backward_rows(const T* __restrict dy, int64_t ldy, const T* __restrict z, T* __restrict dz, int64_t r0,
                          int64_t r1, uint32_t w) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* __restrict dyr = dy + r * ldy;
    const T* __restrict zr = z + r * w;
    T* __restrict dzr = dz + r * w;
    for (uint32_t o = 0; o < w; ++o) dzr[o] = dyr[o] * activate_derivative(A, zr[o]);
  }
}

// A switch over every activation with CALL(A) in each case, spelled out in each entry point so
// that the loops are inlined into, and compiled for, each of its instruction-set clones.
#define TINYFUSE_FOR_ACTIVATION(act, CALL)                   \
  switch (act) {                                             \
    case Activation::None: CALL(Activation::None); break;    \
    case Activation::ReLU: CALL(Activation::ReLU); break;    \
    case Activation::LeakyReLU: CALL(Activation::LeakyReLU); break; \
    case Activation::SiLU: CALL(Activation::SiLU); break;    \
    case Activation::Exponential: CALL(Activation::Exponential); break; \
    case Activation::Sine: CALL(Activation::Sine); break;    \
    case Activation::Sigmoid: CALL(Activation::Sigmoid); break; \
    case Activation::Squareplus: CALL(Activation::Squareplus); break; \
    case Activation::Softplus: CALL(Activation::Softplus); break; \
    case Activation::Tanh: CALL(Activation::Tanh); break;    \
  }

}  // namespace

TINYFUSE_ISA_CLONES
void bias_activate(Activation act, float* z, float* y, const float* bias, int64_t r0, int64_t r1, uint32_t width) {
#define CALL(A) bias_activate_rows<A>(z, y, bias, r0, r1, width)
  TINYFUSE_FOR_ACTIVATION(act, CALL)
#undef CALL
}

TINYFUSE_ISA_CLONES
void bias_activate(Activation act, double* z, double* y, const double* bias, int64_t r0, int64_t r1, uint32_t width) {
#define CALL(A) bias_activate_rows<A>(z, y, bias, r0, r1, width)
  TINYFUSE_FOR_ACTIVATION(act, CALL)
#undef CALL
}

TINYFUSE_ISA_CLONES
void activation_backward(Activation act, const float* dy, int64_t ldy, const float* z, float* dz, int64_t r0,
                         int64_t r1, uint32_t width) {
#define CALL(A) backward_rows<A>(dy, ldy, z, dz, r0, r1, width)
  TINYFUSE_FOR_ACTIVATION(act, CALL)
#undef CALL
}

TINYFUSE_ISA_CLONES
void activation_backward(Activation act, const double* dy, int64_t ldy, const double* z, double* dz, int64_t r0,
                         int64_t r1, uint32_t width) {
#define CALL(A) backward_rows<A>(dy, ldy, z, dz, r0, r1, width)
  TINYFUSE_FOR_ACTIVATION(act, CALL)
#undef CALL
}

const char* elementwise_isa() {
#if defined(__x86_64__) && defined(__ELF__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
#endif
  return "baseline";
}

}  // namespace tinyfuse::cpu
