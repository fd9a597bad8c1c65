// tile_gemm_kernel.inl on AVX2 with FMA (8 lanes, 16 registers: up to 2 vectors by 6 rows).
#include <immintrin.h>

#include "cpu/tiles/tile_gemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TINYFUSE_TILE_TARGET __attribute__((target("avx2,fma"), always_inline)) inline

namespace tinyfuse::cpu {
namespace {

struct V {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kMaxVectors = 2;
  static constexpr int rows_for(int nv) { return nv == 2 ? 6 : 12; }
  using Mask = __m256i;
  TINYFUSE_TILE_TARGET static Mask mask(int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
  }
  TINYFUSE_TILE_TARGET static Reg zero() { return _mm256_setzero_ps(); }
  TINYFUSE_TILE_TARGET static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  TINYFUSE_TILE_TARGET static Reg load_part(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  TINYFUSE_TILE_TARGET static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  TINYFUSE_TILE_TARGET static void store_part(float* p, Reg v, Mask m) { _mm256_maskstore_ps(p, m, v); }
  TINYFUSE_TILE_TARGET static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  TINYFUSE_TILE_TARGET static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
};

}  // namespace
}  // namespace tinyfuse::cpu

namespace tinyfuse::cpu {
#include "cpu/tiles/tile_gemm_kernel.inl"

__attribute__((target("avx2,fma"))) void tile_gemm_avx2(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row,
                                                         int64_t a_inner, const float* b, int64_t ldb, float* c,
                                                         int64_t ldc, bool accumulate) {
  tile_gemm_impl(m, n, k, a, a_row, a_inner, b, ldb, c, ldc, accumulate);
}
}  // namespace tinyfuse::cpu
#endif
