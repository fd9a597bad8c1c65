// Where each element of a 16 x 16 x 16 matrix-core product lives in a wave's registers on AMD
// GPUs, for the three instruction families the fused kernels use (D = A B + C, A 16 x 16 (m x k),
// B 16 x 16 (k x n), C / D 16 x 16 FP32):
//   Gfx11Wmma: v_wmma_f32_16x16x16_{f16,bf16} on RDNA3 (gfx11xx), wave32. A: lane l holds row
//              l % 16, all 16 k (lanes 16..31 repeat lanes 0..15); B: column l % 16, all 16 k;
//              C / D: element i of lane l is row 2 i + l / 16, column l % 16.
//   Gfx12Wmma: the same instructions on RDNA4 (gfx12xx), wave32. A: lane l holds row l % 16,
//              k = 8 (l / 16) + i; B: column l % 16, k = 8 (l / 16) + i; C / D: row 8 (l / 16) + i,
//              column l % 16.
//   CdnaMfma:  v_mfma_f32_16x16x16{f16,bf16_1k} on CDNA (gfx908, gfx90a, gfx94x), wave64. A: row
//              l % 16, k = 4 (l / 16) + i; B: column l % 16, k = 4 (l / 16) + i; C / D: row
//              4 (l / 16) + i, column l % 16.
// (AMD's RDNA3 and RDNA4 ISA references, the GPUOpen WMMA-on-RDNA3 guide and AMD's matrix
// instruction calculator.) The gathers and scatters below are the fused kernels' own fragment
// index code: the device side (amd_matrix_ops.cuh) calls them with its lane, and the CPU test
// tests/cpu/test_amd_fragment_layout.cpp runs them, lane by lane, through an emulated wave. Host
// and device; no HIP headers, so the CPU build compiles it.
#pragma once

#if defined(__HIPCC__) || defined(__CUDACC__)
#define TF_AMD_HD __host__ __device__
#else
#define TF_AMD_HD
#endif

namespace tinyfuse::cuda::amd {

enum class MatrixIsa { Gfx11Wmma, Gfx12Wmma, CdnaMfma };

constexpr int kFrag = 16;  // M = N = K of every product

template <MatrixIsa>
struct FragmentLayout;

template <>
struct FragmentLayout<MatrixIsa::Gfx11Wmma> {
  static constexpr int kWave = 32;
  static constexpr int kOperandElems = 16;  // 16-bit values per lane in A and in B
  static constexpr int kAccElems = 8;       // FP32 values per lane in C / D
  TF_AMD_HD static constexpr int operand_lane_dim(int lane) { return lane % 16; }  // A's row, B's column
  TF_AMD_HD static constexpr int operand_k(int /*lane*/, int i) { return i; }
  TF_AMD_HD static constexpr int acc_row(int lane, int i) { return 2 * i + lane / 16; }
  TF_AMD_HD static constexpr int acc_col(int lane, int /*i*/) { return lane % 16; }
};

template <>
struct FragmentLayout<MatrixIsa::Gfx12Wmma> {
  static constexpr int kWave = 32;
  static constexpr int kOperandElems = 8;
  static constexpr int kAccElems = 8;
  TF_AMD_HD static constexpr int operand_lane_dim(int lane) { return lane % 16; }
  TF_AMD_HD static constexpr int operand_k(int lane, int i) { return 8 * (lane / 16) + i; }
  TF_AMD_HD static constexpr int acc_row(int lane, int i) { return 8 * (lane / 16) + i; }
  TF_AMD_HD static constexpr int acc_col(int lane, int /*i*/) { return lane % 16; }
};

template <>
struct FragmentLayout<MatrixIsa::CdnaMfma> {
  static constexpr int kWave = 64;
  static constexpr int kOperandElems = 4;
  static constexpr int kAccElems = 4;
  TF_AMD_HD static constexpr int operand_lane_dim(int lane) { return lane % 16; }
  TF_AMD_HD static constexpr int operand_k(int lane, int i) { return 4 * (lane / 16) + i; }
  TF_AMD_HD static constexpr int acc_row(int lane, int i) { return 4 * (lane / 16) + i; }
  TF_AMD_HD static constexpr int acc_col(int lane, int /*i*/) { return lane % 16; }
};

// In every layout a lane's operand values are consecutive k: operand_k(lane, i) =
// operand_k(lane, 0) + i. The gathers from k-contiguous memory rely on it (the device reads each
// lane's run with vector loads from operand_run_offset); the CPU test checks it.

// Offset of a lane's first operand value in a k-contiguous 16 x 16 block (row stride ld): the
// lane's run of kOperandElems values starts there.
template <class L>
TF_AMD_HD constexpr int operand_run_offset(int lane, int ld) {
  return L::operand_lane_dim(lane) * ld + L::operand_k(lane, 0);
}

// A operand: the 16 x 16 block at p, row-major (A[m][k] at m * ld + k).
template <class L, class R, class T>
TF_AMD_HD inline void gather_a(R* frag, const T* p, int ld, int lane) {
  for (int i = 0; i < L::kOperandElems; ++i) frag[i] = p[operand_run_offset<L>(lane, ld) + i];
}

// B operand read as a column-major matrix (B[k][n] at n * ld + k): the transposed weights of a
// forward product, W[n][k] of row-major (out x in) weights. The same run per lane as A's.
template <class L, class R, class T>
TF_AMD_HD inline void gather_b_col_major(R* frag, const T* p, int ld, int lane) {
  for (int i = 0; i < L::kOperandElems; ++i) frag[i] = p[operand_run_offset<L>(lane, ld) + i];
}

// B operand read as stored, row-major (B[k][n] at k * ld + n): the backward product's weights.
template <class L, class R, class T>
TF_AMD_HD inline void gather_b_row_major(R* frag, const T* p, int ld, int lane) {
  for (int i = 0; i < L::kOperandElems; ++i) frag[i] = p[L::operand_k(lane, i) * ld + L::operand_lane_dim(lane)];
}

// The accumulator block into p, row-major (D[m][n] at m * ld + n).
template <class L, class R, class T>
TF_AMD_HD inline void scatter_acc(T* p, const R* frag, int ld, int lane) {
  for (int i = 0; i < L::kAccElems; ++i) p[L::acc_row(lane, i) * ld + L::acc_col(lane, i)] = frag[i];
}

}  // namespace tinyfuse::cuda::amd
