// Small matrix products for the row-tile engine (row_tiles.cpp): blocks of a few rows by up to
// four vector registers of columns, held in registers across the whole inner dimension, for the
// shapes these MLPs have (inner dimension and columns 1..128, rows a tile of the batch).
#pragma once

#include <cstdint>

namespace tinyfuse::cpu {

// C (m x n, leading dimension ldc) = A B, or C += A B when `accumulate`, where
// A(i, p) = a[i * a_row + p * a_inner] (m x k; either stride may be 1, so A can be read
// transposed) and B is row-major (k x n, leading dimension ldb). Each element of C is one chain
// of fused multiply-adds over p ascending, whichever instruction set runs it, so the AVX2 and
// AVX-512 kernels give the same bits.
using TileGemmFn = void (*)(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_inner,
                            const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

struct TileGemm {
  const char* isa;  // "avx512f" or "avx2"
  TileGemmFn gemm;
};

// The kernels for this CPU's best instruction set, or null where it has neither AVX2 with FMA nor
// AVX-512 (the MLP then runs layer by layer on the BLAS). TINYFUSE_CPU_ISA=avx2 or =baseline caps
// the choice (for comparisons, and for a CPU that misreports what it has); read once.
const TileGemm* tile_gemm();

// The kernels for one instruction set ("avx512f" or "avx2") when this CPU runs it, else null.
const TileGemm* tile_gemm_for(const char* isa);

}  // namespace tinyfuse::cpu
