// Row-major matrix products through CBLAS (OpenBLAS), for float and double. OpenBLAS runs on one
// thread per call; large products are shared across the project's own pool (parallel.h).
#pragma once

#include <cstdint>

namespace tinyfuse::cpu {

// C (m x n) = alpha * op(A) * op(B) + beta * C, all row-major with leading dimensions lda/ldb/ldc.
// op(A) is m x k, op(B) is k x n.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// Name and version of the BLAS in use, for benchmark reports.
const char* blas_name();

}  // namespace tinyfuse::cpu
