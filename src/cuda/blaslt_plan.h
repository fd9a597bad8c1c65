// One BLAS-Lt (cuBLASLt / hipBLASLt) matrix product in the library's column-major terms, and a
// process-wide cache of what each distinct product needs on the host: its matmul descriptor,
// matrix layouts and the algorithm the library's heuristic chose, per handle (= per device).
//
//   D (m x n) = op(A) op(B) + beta * D       [+ bias (m) broadcast over columns] [then ReLU]
//
// A is m x k after op, B is k x n after op, every matrix column-major with the given leading
// dimension; C is D (accumulation happens in place). Operands, output and bias share one dtype
// (F32 or F16); the product always accumulates in FP32 (CUBLAS_COMPUTE_32F, never TF32), with
// FP32 alpha (1) and beta.
//
// Algorithms: the heuristic's first choice for the problem (shape, transposes, leading
// dimensions, dtype, epilogue and the alignment of every pointer), asked once and cached. The
// same problem therefore always runs the same algorithm with a caller-owned workspace, which
// cuBLAS documents as bitwise reproducible (same toolkit, same GPU model).
#pragma once

#include <cstdint>

#include "cuda/gpu_runtime.h"
#include "tinyfuse/common.h"

namespace tinyfuse::cuda {

enum class BlasLtEpilogue { None, Bias, ReluBias };

struct BlasLtMatmul {
  DType dtype = DType::F32;  // of A, B, C = D and the bias: F32 or F16
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  float beta = 0.0f;  // 0: D is overwritten (never read, may hold NaN); 1: D += op(A) op(B)
  BlasLtEpilogue epilogue = BlasLtEpilogue::None;
  const void* bias = nullptr;  // m elements, for Bias and ReluBias
};

// Queues the product on `stream` (no host synchronisation; a workspace, if the algorithm wants
// one, is taken from the stream-ordered pool and released in stream order).
// With a fused epilogue it returns false, having queued nothing, when the library cannot fuse it
// for these operands (bias pointer less than 16-byte aligned, or no algorithm): the caller then
// adds the bias itself. Throws UnsupportedError when no algorithm runs even the plain product
// (the message names the shape, dtype and alignments), GpuError on any other failure.
bool run_blaslt_matmul(const BlasLtMatmul& mm, gpuStream_t stream);

// Whether the library has an algorithm for the plain product of this shape, with every pointer
// 256-byte aligned (cudaMalloc's alignment) and the given leading dimensions. Host-only; used at
// construction to reject widths the library cannot run. The answer is cached like any plan.
bool blaslt_matmul_supported(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                             int64_t ldb, int64_t ldd);

// Largest power of two (at most 256) dividing the address and ld * element size: the alignment
// the library may assume for every column of a matrix.
uint32_t blaslt_alignment(const void* p, int64_t ld, DType dtype);

}  // namespace tinyfuse::cuda
