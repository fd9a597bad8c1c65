// tile_gemm_kernel.inl on AVX-512 (16 lanes, 32 registers: up to 4 vectors by 6 rows).
#include <immintrin.h>

#include "cpu/tiles/tile_gemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TINYFUSE_TILE_TARGET __attribute__((target("avx512f,fma"), always_inline)) inline

namespace tinyfuse::cpu {
namespace {

struct V {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kMaxVectors = 4;
  // Accumulators, the panel's B vectors and one broadcast within the 32 registers.
  static constexpr int rows_for(int nv) { return nv == 4 ? 6 : nv == 3 ? 8 : nv == 2 ? 12 : 16; }
  using Mask = __mmask16;
  TINYFUSE_TILE_TARGET static Mask mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  TINYFUSE_TILE_TARGET static Reg zero() { return _mm512_setzero_ps(); }
  TINYFUSE_TILE_TARGET static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  TINYFUSE_TILE_TARGET static Reg load_part(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  TINYFUSE_TILE_TARGET static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  TINYFUSE_TILE_TARGET static void store_part(float* p, Reg v, Mask m) { _mm512_mask_storeu_ps(p, m, v); }
  TINYFUSE_TILE_TARGET static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  TINYFUSE_TILE_TARGET static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace
}  // namespace tinyfuse::cpu

namespace tinyfuse::cpu {
#include "cpu/tiles/tile_gemm_kernel.inl"

__attribute__((target("avx512f,fma"))) void tile_gemm_avx512(int64_t m, int64_t n, int64_t k, const float* a,
                                                              int64_t a_row, int64_t a_inner, const float* b,
                                                              int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  tile_gemm_impl(m, n, k, a, a_row, a_inner, b, ldb, c, ldc, accumulate);
}
}  // namespace tinyfuse::cpu
#endif
