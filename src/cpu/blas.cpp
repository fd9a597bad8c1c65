#include "cpu/blas.h"

#include <cblas.h>

#include <string>

namespace tinyfuse::cpu {

namespace {
CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }
}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
              a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
              a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

const char* blas_name() {
  static const std::string name = [] {
    std::string s = openblas_get_config();  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Haswell ..."
    return s.rfind("OpenBLAS", 0) == 0 ? s : "OpenBLAS " + s;
  }();
  return name.c_str();
}

}  // namespace tinyfuse::cpu
