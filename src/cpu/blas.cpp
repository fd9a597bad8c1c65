#include "cpu/blas.h"

#include <cblas.h>

#include <algorithm>
#include <string>

#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }

// One pool owns the cores: OpenBLAS runs each call on the calling thread, and a product large
// enough to share is split across parallel_for's workers. (With its own threads, OpenBLAS's
// workers spin beside the pool's and the second core adds almost nothing.)
void single_threaded_blas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

// Multiply-adds below which a product runs whole on the calling thread (waking the pool costs
// more), the fewest rows or columns of C a share gets, and the most shares (each share packs its
// own copy of the other operand: 1024^3 in 32 shares loses ~3 % to that).
constexpr int64_t kMinSplitWork = int64_t{1} << 20;
constexpr int64_t kMinShareSide = 16;
constexpr int64_t kMaxShares = 32;

// C = alpha op(A) op(B) + beta C, split into shares of C's rows (or columns, when C is wider than
// tall) of a size fixed by the shape alone, so results do not depend on the thread count. Every
// element of C is a whole dot product over k in one share.
template <typename T, typename Gemm>
void split_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                T* c, int64_t ldc, Gemm&& call) {
  if (m == 0 || n == 0) return;
  single_threaded_blas();
  const bool by_rows = m >= n;
  const int64_t side = by_rows ? m : n;
  const int64_t work = m * n * std::max<int64_t>(k, 1);
  const int64_t shares = std::min({work / kMinSplitWork, side / kMinShareSide, kMaxShares});
  if (shares <= 1) {
    call(m, n, a, b, c);
    return;
  }
  const int64_t per_share = (side + shares - 1) / shares;
  const int64_t grain = (per_share + kMinShareSide - 1) / kMinShareSide * kMinShareSide;
  parallel_for(side, grain, [&](int64_t i0, int64_t i1) {
    if (by_rows)  // rows i0..i1 of op(A) and C
      call(i1 - i0, n, ta ? a + i0 : a + i0 * lda, b, c + i0 * ldc);
    else  // columns i0..i1 of op(B) and C
      call(m, i1 - i0, a, tb ? b + i0 * ldb : b + i0, c + i0);
  });
}

}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  split_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc,
             [&](int64_t mm, int64_t nn, const float* aa, const float* bb, float* cc) {
               cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), static_cast<int>(mm), static_cast<int>(nn), static_cast<int>(k),
                           alpha, aa, static_cast<int>(lda), bb, static_cast<int>(ldb), beta, cc, static_cast<int>(ldc));
             });
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  split_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc,
             [&](int64_t mm, int64_t nn, const double* aa, const double* bb, double* cc) {
               cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), static_cast<int>(mm), static_cast<int>(nn), static_cast<int>(k),
                           alpha, aa, static_cast<int>(lda), bb, static_cast<int>(ldb), beta, cc, static_cast<int>(ldc));
             });
}

const char* blas_name() {
  static const std::string name = [] {
    std::string s = openblas_get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Haswell ..."
    return s.rfind("OpenBLAS", 0) == 0 ? s : "OpenBLAS " + s;
  }();
  return name.c_str();
}

}  // namespace tinyfuse::cpu
