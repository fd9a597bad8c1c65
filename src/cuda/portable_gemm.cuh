// Plain FP32 tiled GEMM kernels for PortableMLP (no vendor library), with the MLP's epilogues fused.
//
// One kernel template computes C (M x N) = sum over k of A(m, k) * B(k, n) for any M, N, K (tails
// are zero-filled in shared memory) and any leading dimensions, with each operand read either
// k-contiguous or m/n-contiguous, so the three products of an MLP layer need no transposes:
//
//   forward        Z = X W^T + b, Y = act(Z)   A = X  (m, k) at m*ldx + k    B = W (k = in, n = out) at n*in + k
//   input grad     dZ' = (dZ W) * act'(z')     A = dZ (m, k) at m*ldz + k    B = W (k = out, n = in) at k*in + n
//   weight grad    dW = dZ^T X, db = dZ^T 1    A = dZ (o, k) at k*ldz + o    B = X (k = batch, n = in) at k*ldx + n
//
// Block: 256 threads, a BM x BN tile of C, K walked in BK-deep slices that are double-buffered in
// shared memory (the next slice is fetched into registers while the current one is multiplied).
// Each thread keeps a TM x TN register tile: rows ty*TM + i (read from shared memory as float4),
// columns either interleaved (tx + TX*j: consecutive threads store consecutive columns, so stores
// are coalesced without any alignment assumption) or contiguous (tx*TN + j, read as float4).
//
// Shared-memory banks: an operand read k-contiguous from global memory is loaded by warps covering
// 4 rows x 8 k (four 32-byte segments) and stored transposed with a row pitch of R + 4 floats
// (= 4 mod 32 banks), which makes those stores conflict-free; operands read along m/n are stored
// as they come. The weight-gradient kernel splits K (the batch) into fixed chunks (blockIdx.z);
// each chunk writes its own partial tile, summed afterwards in a fixed order (no atomics).
#pragma once

#include <cstdint>

#include "core/activation_math.h"
#include "cuda/common.cuh"

namespace tinyfuse::cuda::pgemm {

constexpr int kThreads = 256;

enum class Epilogue {
  Forward,     // z = acc + bias[n]; Z = z, Y = act(z), out = act(z) (each optional)
  InputGrad,   // C = acc * act'(zprev) (act = None: C = acc)
  WeightGrad,  // C (+)= acc per K chunk; column sums of A (the bias gradient) into Cb
};

struct Params {
  const float* A = nullptr;
  int64_t lda = 0;
  const float* B = nullptr;
  int64_t ldb = 0;
  int64_t M = 0, N = 0, K = 0;
  int64_t k_chunk = 0;  // K rows per blockIdx.z (== K when K is not split)
  // Forward
  const float* bias = nullptr;
  float* Z = nullptr;
  int64_t ldz = 0;
  float* Y = nullptr;
  int64_t ldy = 0;
  float* out = nullptr;
  int64_t ldo = 0;
  // InputGrad (and WeightGrad's C)
  const float* zprev = nullptr;
  int64_t ldzp = 0;
  float* C = nullptr;
  int64_t ldc = 0;
  // WeightGrad: chunk z writes C + z * chunk_stride and Cb + z * chunk_stride.
  float* Cb = nullptr;
  int64_t chunk_stride = 0;
  bool accumulate = false;
};

template <int BM, int BN, int BK, int TM, int TN, bool A_KCONTIG, bool B_KCONTIG, bool N_INTERLEAVED, Epilogue EPI,
          Activation ACT>
__global__ void __launch_bounds__(kThreads, 2) gemm_kernel(const Params p) {
  constexpr int TX = BN / TN;  // threads along n
  constexpr int TY = BM / TM;  // threads along m
  static_assert(TX * TY == kThreads, "tile does not match the block size");
  static_assert(TM % 4 == 0 && BK % 8 == 0 && BM % 32 == 0 && BN % 32 == 0, "unsupported tile");
  static_assert(N_INTERLEAVED || TN % 4 == 0, "contiguous columns are read as float4");
  constexpr int A_LOADS = BM * BK / kThreads;
  constexpr int B_LOADS = BN * BK / kThreads;
  static_assert(A_LOADS * kThreads == BM * BK && B_LOADS * kThreads == BN * BK, "tile loads do not divide evenly");
  static_assert(!A_KCONTIG || (BM / 4) * (BK / 8) == 8 * A_LOADS, "transposed A load mapping");
  static_assert(!B_KCONTIG || (BN / 4) * (BK / 8) == 8 * B_LOADS, "transposed B load mapping");
  static_assert(EPI != Epilogue::WeightGrad || (!A_KCONTIG && kThreads % BM == 0),
                "the bias column sums take A's column from the thread's own loads");
  // Row pitches: +4 floats (4 mod 32 banks) for tiles stored transposed; stays float4-aligned.
  constexpr int SA = BM + (A_KCONTIG ? 4 : 0);
  constexpr int SB = BN + (B_KCONTIG ? 4 : 0);
  __shared__ __align__(16) float As[2][BK][SA];
  __shared__ __align__(16) float Bs[2][BK][SB];

  const int t = threadIdx.x;
  // Load groups of 32 threads (shaped for 32 shared-memory banks), not hardware warps: nothing below
  // relies on the threads of a group running in lock step, so wave64 targets compute the same.
  constexpr int kLoadGroup = 32;
  const int lane = static_cast<int>(threadIdx.x % kLoadGroup), group = static_cast<int>(threadIdx.x / kLoadGroup);
  const int tx = t % TX, ty = t / TX;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * BN;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * p.k_chunk;
  const int64_t k_end = min(p.K, k_begin + p.k_chunk);
  const int m_left = static_cast<int>(min(static_cast<int64_t>(BM), p.M - m0));  // rows of this tile inside C
  const int n_left = static_cast<int>(min(static_cast<int64_t>(BN), p.N - n0));  // columns of this tile inside C

  // Each thread loads the same tile positions every slice: load r of an operand sits at
  // (row0 + row_step * r, kk0 + k_step * r) of the R x BK tile (one of the steps is zero), so one
  // pointer walks the loads and the bounds checks are 32-bit compares.
  //  k-contiguous (transposed into shared memory): a load group covers 4 rows x 8 k, rows step by 32 / KG;
  //  m/n-contiguous: consecutive threads take consecutive rows, k steps by kThreads / R.
  constexpr int KG = BK / 8;
  static_assert(8 % KG == 0, "BK must be 8, 16, 32 or 64");
  static_assert(kThreads % BM == 0 && kThreads % BN == 0, "direct loads keep a fixed row per thread");
  constexpr int A_ROW_STEP = A_KCONTIG ? 32 / KG : 0, A_K_STEP = A_KCONTIG ? 0 : kThreads / BM;
  constexpr int B_ROW_STEP = B_KCONTIG ? 32 / KG : 0, B_K_STEP = B_KCONTIG ? 0 : kThreads / BN;
  const int a_row0 = A_KCONTIG ? 4 * (group / KG) + (lane >> 3) : t % BM;
  const int a_kk0 = A_KCONTIG ? (group % KG) * 8 + (lane & 7) : t / BM;
  const int b_row0 = B_KCONTIG ? 4 * (group / KG) + (lane >> 3) : t % BN;
  const int b_kk0 = B_KCONTIG ? (group % KG) * 8 + (lane & 7) : t / BN;
  // Element (row, k) of A is at A[row * lda + k] (k-contiguous) or A[k * lda + row]; B likewise.
  const int64_t a_row_ld = A_KCONTIG ? p.lda : 1, a_k_ld = A_KCONTIG ? 1 : p.lda;
  const int64_t b_row_ld = B_KCONTIG ? p.ldb : 1, b_k_ld = B_KCONTIG ? 1 : p.ldb;
  const int64_t a_load_stride = A_ROW_STEP * a_row_ld + A_K_STEP * a_k_ld;
  const int64_t b_load_stride = B_ROW_STEP * b_row_ld + B_K_STEP * b_k_ld;
  const float* a_ptr = p.A + (m0 + a_row0) * a_row_ld + (k_begin + a_kk0) * a_k_ld;  // load 0 of the current slice
  const float* b_ptr = p.B + (n0 + b_row0) * b_row_ld + (k_begin + b_kk0) * b_k_ld;

  float ra[A_LOADS], rb[B_LOADS];
  float bias_sum = 0.0f;  // WeightGrad: this thread's share of column a_row0 of A

  // Fetches the slice starting at k0 into registers (zero outside the matrices).
  auto load_tiles = [&](int64_t k0) {
    const int k_left = static_cast<int>(min(static_cast<int64_t>(BK), k_end - k0));
    const float* q = a_ptr;
#pragma unroll
    for (int r = 0; r < A_LOADS; ++r) {
      const bool ok = a_row0 + A_ROW_STEP * r < m_left && a_kk0 + A_K_STEP * r < k_left;
      ra[r] = ok ? __ldg(q) : 0.0f;
      q += a_load_stride;
    }
    q = b_ptr;
#pragma unroll
    for (int r = 0; r < B_LOADS; ++r) {
      const bool ok = b_row0 + B_ROW_STEP * r < n_left && b_kk0 + B_K_STEP * r < k_left;
      rb[r] = ok ? __ldg(q) : 0.0f;
      q += b_load_stride;
    }
  };
  auto store_tiles = [&](int buf) {
#pragma unroll
    for (int r = 0; r < A_LOADS; ++r) {
      As[buf][a_kk0 + A_K_STEP * r][a_row0 + A_ROW_STEP * r] = ra[r];
      if constexpr (EPI == Epilogue::WeightGrad) bias_sum += ra[r];  // zero outside the matrix
    }
#pragma unroll
    for (int r = 0; r < B_LOADS; ++r) Bs[buf][b_kk0 + B_K_STEP * r][b_row0 + B_ROW_STEP * r] = rb[r];
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  // The launcher guarantees k_end > k_begin.
  const int64_t n_slices = (k_end - k_begin + BK - 1) / BK;
  const int64_t a_slice_stride = BK * a_k_ld, b_slice_stride = BK * b_k_ld;
  load_tiles(k_begin);
  store_tiles(0);
  __syncthreads();
  for (int64_t s = 0; s < n_slices; ++s) {
    const int buf = static_cast<int>(s & 1);
    const bool more = s + 1 < n_slices;
    if (more) {  // in flight while this slice is multiplied
      a_ptr += a_slice_stride;
      b_ptr += b_slice_stride;
      load_tiles(k_begin + (s + 1) * BK);
    }
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&As[buf][kk][ty * TM + i]);
        a[i] = v.x;
        a[i + 1] = v.y;
        a[i + 2] = v.z;
        a[i + 3] = v.w;
      }
      if constexpr (N_INTERLEAVED) {
#pragma unroll
        for (int j = 0; j < TN; ++j) b[j] = Bs[buf][kk][tx + TX * j];
      } else {
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const float4 v = *reinterpret_cast<const float4*>(&Bs[buf][kk][tx * TN + j]);
          b[j] = v.x;
          b[j + 1] = v.y;
          b[j + 2] = v.z;
          b[j + 3] = v.w;
        }
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    // The other buffer was last read before the previous barrier, so it can be refilled now.
    if (more) store_tiles(buf ^ 1);
    __syncthreads();
  }

  // Thread columns: n0 + c0 + C_STEP * j; rows: m0 + ty * TM + i.
  constexpr int C_STEP = N_INTERLEAVED ? TX : 1;
  const int c0 = N_INTERLEAVED ? tx : tx * TN;
  bool col_ok[TN];
#pragma unroll
  for (int j = 0; j < TN; ++j) col_ok[j] = c0 + C_STEP * j < n_left;

  if constexpr (EPI == Epilogue::Forward) {
    float bias[TN];
#pragma unroll
    for (int j = 0; j < TN; ++j) bias[j] = p.bias && col_ok[j] ? __ldg(p.bias + n0 + c0 + C_STEP * j) : 0.0f;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      if (ty * TM + i >= m_left) break;
      const int64_t m = m0 + ty * TM + i;
      float* z_row = p.Z ? p.Z + m * p.ldz + n0 + c0 : nullptr;
      float* y_row = p.Y ? p.Y + m * p.ldy + n0 + c0 : nullptr;
      float* o_row = p.out ? p.out + m * p.ldo + n0 + c0 : nullptr;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        if (!col_ok[j]) continue;
        const float z = acc[i][j] + bias[j];
        if (z_row) z_row[C_STEP * j] = z;
        const float y = activate(ACT, z);
        if (y_row) y_row[C_STEP * j] = y;
        if (o_row) o_row[C_STEP * j] = y;
      }
    }
  } else if constexpr (EPI == Epilogue::InputGrad) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      if (ty * TM + i >= m_left) break;
      const int64_t m = m0 + ty * TM + i;
      float* c_row = p.C + m * p.ldc + n0 + c0;
      const float* z_row = ACT != Activation::None ? p.zprev + m * p.ldzp + n0 + c0 : nullptr;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        if (!col_ok[j]) continue;
        float v = acc[i][j];
        if constexpr (ACT != Activation::None) v *= activate_derivative(ACT, __ldg(z_row + C_STEP * j));
        c_row[C_STEP * j] = v;
      }
    }
  } else {  // WeightGrad
    float* C = p.C + static_cast<int64_t>(blockIdx.z) * p.chunk_stride;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      if (ty * TM + i >= m_left) break;
      float* c_row = C + (m0 + ty * TM + i) * p.ldc + n0 + c0;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        if (!col_ok[j]) continue;
        float* c = c_row + C_STEP * j;
        *c = p.accumulate ? *c + acc[i][j] : acc[i][j];
      }
    }
    if (p.Cb && blockIdx.y == 0) {  // uniform per block
      // Threads t, t + BM, t + 2 BM, ... summed column t % BM over interleaved rows of the chunk;
      // add their shares in a fixed order. The loop's last barrier freed As.
      constexpr int G = kThreads / BM;
      float* red = &As[0][0][0];
      static_assert(2 * BK * SA >= kThreads, "reduction scratch");
      red[t] = bias_sum;
      __syncthreads();
      if (t < m_left) {
        float s = red[t];
#pragma unroll
        for (int g = 1; g < G; ++g) s += red[t + g * BM];
        float* c = p.Cb + static_cast<int64_t>(blockIdx.z) * p.chunk_stride + m0 + t;
        *c = p.accumulate ? *c + s : s;
      }
    }
  }
}

// dZ = dY * act'(z) for the output layer (dY strided, z and dZ dense with `width` columns).
__global__ void output_delta_kernel(const float* __restrict__ dy, int64_t ldy, const float* __restrict__ z,
                                    float* __restrict__ dz, int64_t rows, int width, Activation act) {
  const int n = blockIdx.x * 32 + threadIdx.x;
  if (n >= width) return;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * 8 + threadIdx.y; m < rows; m += static_cast<int64_t>(gridDim.y) * 8) {
    const int64_t i = m * width + n;
    dz[i] = dy[m * ldy + n] * activate_derivative(act, z[i]);
  }
}

// out[e] (+)= sum over c < n_chunks of partial[c * count + e], in a fixed order: threads y = 0..7
// of a column sum chunks y, y + 8, ... in turn, then their 8 sums are added in order of y.
__global__ void reduce_chunks_kernel(const float* __restrict__ partial, int64_t count, int n_chunks,
                                     float* __restrict__ out, bool accumulate) {
  __shared__ float red[8][33];
  const int64_t e = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.0f;
  if (e < count) {
#pragma unroll 4
    for (int c = threadIdx.y; c < n_chunks; c += 8) s += partial[static_cast<int64_t>(c) * count + e];
  }
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && e < count) {
    float total = red[0][threadIdx.x];
#pragma unroll
    for (int y = 1; y < 8; ++y) total += red[y][threadIdx.x];
    out[e] = accumulate ? out[e] + total : total;
  }
}

}  // namespace tinyfuse::cuda::pgemm
