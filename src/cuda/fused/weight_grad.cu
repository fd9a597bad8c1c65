// Weight gradients of the fused MLP: dW (out x in) = dZ^T X summed over the batch, after the
// fused backward kernel has written every layer's dZ.
//
// Why a follow-up kernel and not inside the fused backward: the sum runs over the whole batch,
// so inside the fused kernel every block would need its own out x in FP32 partial (or atomics,
// which are not deterministic). Here the batch is cut into chunks fixed by the batch size alone;
// one block per (64 x 64 tile of dW, chunk) multiplies on tensor cores (FP16/BF16 operands,
// FP32 accumulators) into an FP32 partial, and a second kernel adds the chunks in order: the
// result is bitwise repeatable, and the only rounding to T is the final one.
//
// Operands from the row-major (batch x features) matrices, both through ldmatrix .trans:
//   A (m = out, k = batch row) = dZ^T: stored rows are k, 8 consecutive m per 16 bytes;
//   B (k = batch row, n = in)  = X:    stored rows are k, 8 consecutive n per 16 bytes.
//
// HIP builds compile a plain FP32 partial kernel instead (below; no rocWMMA, so it compiles with
// Debian's HIP): the same blocks, chunks, partial layout and reduction, hence the same
// determinism. Everything but the partial kernel and its block size is shared.
#include <algorithm>

#include "cuda/fused/kernel_common.cuh"
#if !defined(TINYFUSE_WITH_HIP)
#include "cuda/fused/mma.cuh"
#include "cuda/ptx_sm80.cuh"
#endif

namespace tinyfuse::cuda::fused {

namespace {

constexpr int kTile = 64;         // dW tile of a block (out and in)
constexpr int kStepRows = 32;     // batch rows staged in shared memory per step
constexpr int kMaxChunks = 512;   // the batch is cut into at most this many chunks ...
constexpr int64_t kMinChunkRows = 256;  // ... of at least this many rows
constexpr int kStride = kTile + kSmemPad;

struct Split {
  int64_t chunk_rows, chunks;
};
Split split_batch(int64_t batch) {
  int64_t rows = std::max<int64_t>(kMinChunkRows, (batch + kMaxChunks - 1) / kMaxChunks);
  rows = (rows + kStepRows - 1) / kStepRows * kStepRows;
  return {rows, std::max<int64_t>(1, (batch + rows - 1) / rows)};
}

// One 32 x 64 slab of a row-major matrix into shared memory; zero outside rows [.., row_end)
// and columns [.., cols).
template <typename T>
__device__ __forceinline__ void stage_slab(T (*dst)[kStride], const T* src, int64_t ld, int64_t row0, int64_t row_end,
                                           int col0, int cols) {
  constexpr int kChunks = kStepRows * kTile / 8;  // 16-byte pieces
  for (int i = threadIdx.x; i < kChunks; i += blockDim.x) {
    const int r = i / (kTile / 8), c = (i % (kTile / 8)) * 8;
    const int64_t row = row0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < row_end && col0 + c < cols) v = __ldg(reinterpret_cast<const uint4*>(src + row * ld + col0 + c));
    *reinterpret_cast<uint4*>(&dst[r][c]) = v;
  }
}

#if !defined(TINYFUSE_WITH_HIP)

constexpr int kWarpTile = 32;     // dW tile of a warp: 2 x 2 warps per block
constexpr int kPipe = 3;          // slabs in flight per block (sm_80+: cp.async)

// The same slab as stage_slab, copied asynchronously (sm_80+): 16 bytes per cp.async, zeros by a
// zero-byte source outside the rows and columns.
template <typename T>
__device__ __forceinline__ void issue_slab(T (*dst)[kStride], const T* src, int64_t ld, int64_t row0, int64_t row_end,
                                           int col0, int cols) {
  constexpr int kChunks = kStepRows * kTile / 8;
  for (int i = threadIdx.x; i < kChunks; i += blockDim.x) {
    const int r = i / (kTile / 8), c = (i % (kTile / 8)) * 8;
    const int64_t row = row0 + r;
    const bool valid = row < row_end && col0 + c < cols;
    ptx::cp_async_16(ptx::shared_address(&dst[r][c]), valid ? src + row * ld + col0 + c : src, valid ? 16u : 0u);
  }
}

// acc += the slab's products: a warp's 32 x 32 piece of dW over kStepRows batch rows, in row order.
template <typename T>
__device__ __forceinline__ void slab_products(float (&acc)[2][4][4], const T (*s_dz)[kStride], const T (*s_x)[kStride],
                                              int wm, int wn, int lane) {
  const int q = lane / 8, r8 = lane % 8;
#pragma unroll
  for (int ks = 0; ks < kStepRows / 16; ++ks) {
    uint32_t a[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i) ldmatrix_x4_trans(a[i], &s_dz[16 * ks + (q / 2) * 8 + r8][wm + 16 * i + (q % 2) * 8]);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, &s_x[16 * ks + (q % 2) * 8 + r8][wn + 16 * j + (q / 2) * 8]);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        mma_16816<T>(acc[i][2 * j], a[i], b[0], b[1]);
        mma_16816<T>(acc[i][2 * j + 1], a[i], b[2], b[3]);
      }
    }
  }
}

// One block per (64 x 64 tile of dW, chunk of the batch). On sm_80+ the slabs stream in through
// a kPipe-deep cp.async pipeline (the copy of slab i + 2 overlaps the products of slab i); on
// sm_75 they are staged synchronously. Same products in the same order either way.
template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    weight_grad_partial_kernel(int64_t batch, const T* dz, int64_t ld_dz, int rows, const T* x, int64_t ld_x, int cols,
                               int64_t chunk_rows, float* partial) {
  static_assert(kWarpsPerBlock == 4, "a block is 2 x 2 warps of 32 x 32");
  __shared__ __align__(16) T s_dz[kPipe][kStepRows][kStride];
  __shared__ __align__(16) T s_x[kPipe][kStepRows][kStride];
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int64_t chunk = blockIdx.z;
  const int64_t r_begin = chunk * chunk_rows, r_end = std::min(batch, r_begin + chunk_rows);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int wm = (warp / 2) * kWarpTile, wn = (warp % 2) * kWarpTile;  // within the block tile
  const bool active = m0 + wm < rows && n0 + wn < cols;  // warp-uniform

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int64_t steps = (r_end - r_begin + kStepRows - 1) / kStepRows;
  for (int st = 0; st < kPipe - 1; ++st) {  // one commit group per slab
    if (st < steps) {
      issue_slab(s_dz[st], dz, ld_dz, r_begin + st * kStepRows, r_end, m0, rows);
      issue_slab(s_x[st], x, ld_x, r_begin + st * kStepRows, r_end, n0, cols);
    }
    ptx::cp_async_commit();
  }
  for (int64_t it = 0; it < steps; ++it) {
    ptx::cp_async_wait<kPipe - 2>();  // slab it has landed (this thread's copies) ...
    __syncthreads();                  // ... everyone's, and everyone is done with slab it - 1
    const int64_t next = it + kPipe - 1;
    const int slot = static_cast<int>(it % kPipe), next_slot = static_cast<int>(next % kPipe);
    if (next < steps) {
      issue_slab(s_dz[next_slot], dz, ld_dz, r_begin + next * kStepRows, r_end, m0, rows);
      issue_slab(s_x[next_slot], x, ld_x, r_begin + next * kStepRows, r_end, n0, cols);
    }
    ptx::cp_async_commit();
    if (active) slab_products<T>(acc, s_dz[slot], s_x[slot], wm, wn, lane);
  }
  ptx::cp_async_wait<0>();
#else
  for (int64_t k = r_begin; k < r_end; k += kStepRows) {
    stage_slab(s_dz[0], dz, ld_dz, k, r_end, m0, rows);
    stage_slab(s_x[0], x, ld_x, k, r_end, n0, cols);
    __syncthreads();
    if (active) slab_products<T>(acc, s_dz[0], s_x[0], wm, wn, lane);
    __syncthreads();
  }
#endif

  if (!active) return;
  const int g = lane_group(), t = lane_in_group();
  float* out = partial + chunk * static_cast<int64_t>(rows) * cols;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wm + 16 * i + g + 8 * h, n = n0 + wn + 8 * j + 2 * t;
        if (m < rows && n < cols)
          *reinterpret_cast<float2*>(out + static_cast<int64_t>(m) * cols + n) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
}

#else  // TINYFUSE_WITH_HIP

// The HIP partial kernel: plain FP32 arithmetic, no matrix cores. Why not rocWMMA: simpler, and
// it then compiles (and is checked here) without rocWMMA, which Debian 12 does not package. It is
// slower than a matrix-core kernel would be; a rocWMMA version is for after a measurement on AMD
// hardware says the weight gradient's share of a training step matters.
// Each of the block's kPartialThreads threads owns a 4 x 4 piece of the 64 x 64 dW tile and adds
// dz[k][m] * x[k][n] over the chunk's rows in batch order. The product of two FP16 (or BF16)
// values is exact in FP32, so every step is one FP32 rounding whether or not the compiler
// contracts it into an FMA: FP32 accumulation as launch.h specifies, in a summation order fixed
// by the batch size alone (bitwise repeatable, no atomics). The order is not the tensor cores',
// so HIP and CUDA results agree to FP32 rounding, not bitwise. No warp-level operations, so
// nothing here depends on the wave size (32 or 64).
constexpr int kPiece = 4;                                         // dW rows and columns per thread
constexpr int kPartialThreads = (kTile / kPiece) * (kTile / kPiece);  // 256
static_assert(kPartialThreads <= 1024, "one block per dW tile");

template <typename T>
__global__ void __launch_bounds__(kPartialThreads)
    weight_grad_partial_kernel(int64_t batch, const T* dz, int64_t ld_dz, int rows, const T* x, int64_t ld_x, int cols,
                               int64_t chunk_rows, float* partial) {
  __shared__ __align__(16) T s_dz[kStepRows][kStride];
  __shared__ __align__(16) T s_x[kStepRows][kStride];
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int64_t chunk = blockIdx.z;
  const int64_t r_begin = chunk * chunk_rows, r_end = std::min(batch, r_begin + chunk_rows);
  const int pm = (threadIdx.x / (kTile / kPiece)) * kPiece, pn = (threadIdx.x % (kTile / kPiece)) * kPiece;

  float acc[kPiece][kPiece] = {};
  for (int64_t k = r_begin; k < r_end; k += kStepRows) {
    stage_slab(s_dz, dz, ld_dz, k, r_end, m0, rows);  // zeros past the chunk and outside dW
    stage_slab(s_x, x, ld_x, k, r_end, n0, cols);
    __syncthreads();
    for (int kk = 0; kk < kStepRows; ++kk) {
      float a[kPiece], b[kPiece];
#pragma unroll
      for (int i = 0; i < kPiece; ++i) {
        a[i] = to_float(s_dz[kk][pm + i]);
        b[i] = to_float(s_x[kk][pn + i]);
      }
#pragma unroll
      for (int i = 0; i < kPiece; ++i)
#pragma unroll
        for (int j = 0; j < kPiece; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }

  float* out = partial + chunk * static_cast<int64_t>(rows) * cols;
#pragma unroll
  for (int i = 0; i < kPiece; ++i)
#pragma unroll
    for (int j = 0; j < kPiece; ++j) {
      const int m = m0 + pm + i, n = n0 + pn + j;
      if (m < rows && n < cols) out[static_cast<int64_t>(m) * cols + n] = acc[i][j];
    }
}

#endif  // TINYFUSE_WITH_HIP

// grad[e] = [grad[e] +] sum over chunks of partial[chunk][e], chunks in order. The loads of
// kReduceBatch chunks are issued before their sums (in the same order), so a thread keeps that
// many loads in flight; small blocks spread the few thousand threads over many SMs.
constexpr int kReduceBatch = 16;
constexpr int kReduceThreads = 64;

template <typename T>
__global__ void weight_grad_reduce_kernel(int64_t chunks, int64_t elems, const float* partial, T* grad, bool accumulate) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= elems) return;
  float s = 0.0f;
  int64_t c = 0;
  for (; c + kReduceBatch <= chunks; c += kReduceBatch) {
    float v[kReduceBatch];
#pragma unroll
    for (int i = 0; i < kReduceBatch; ++i) v[i] = partial[(c + i) * elems + e];
#pragma unroll
    for (int i = 0; i < kReduceBatch; ++i) s += v[i];
  }
  for (; c < chunks; ++c) s += partial[c * elems + e];
  grad[e] = from_float<T>(accumulate ? to_float(grad[e]) + s : s);
}

template <typename T>
void launch_typed(int64_t batch, const void* dz, int64_t ld_dz, int rows, const void* x, int64_t ld_x, int cols,
                  float* partial, void* grad, bool accumulate, gpuStream_t stream) {
  const Split split = split_batch(batch);
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile, static_cast<unsigned>(split.chunks));
#if !defined(TINYFUSE_WITH_HIP)
  weight_grad_partial_kernel<T><<<grid, kWarpsPerBlock * kWarpSize, 0, stream>>>(
      batch, static_cast<const T*>(dz), ld_dz, rows, static_cast<const T*>(x), ld_x, cols, split.chunk_rows, partial);
#else
  weight_grad_partial_kernel<T><<<grid, kPartialThreads, 0, stream>>>(
      batch, static_cast<const T*>(dz), ld_dz, rows, static_cast<const T*>(x), ld_x, cols, split.chunk_rows, partial);
#endif
  TF_GPU_CHECK_LAUNCH("weight_grad_partial_kernel");
  const int64_t elems = static_cast<int64_t>(rows) * cols;
  weight_grad_reduce_kernel<T><<<static_cast<unsigned>((elems + kReduceThreads - 1) / kReduceThreads), kReduceThreads, 0,
                                 stream>>>(split.chunks, elems, partial, static_cast<T*>(grad), accumulate);
  TF_GPU_CHECK_LAUNCH("weight_grad_reduce_kernel");
}

}  // namespace

size_t weight_grad_partial_floats(int64_t batch, int rows, int cols) {
  return static_cast<size_t>(split_batch(batch).chunks) * rows * cols;
}

void launch_weight_gradient(DType t, int64_t batch, const void* dz, int64_t ld_dz, int rows, const void* x,
                            int64_t ld_x, int cols, float* partial, void* grad, bool accumulate, gpuStream_t stream) {
  if (batch <= 0) throw UnsupportedError("internal: weight gradient of an empty batch");
  if (t == DType::F16) return launch_typed<__half>(batch, dz, ld_dz, rows, x, ld_x, cols, partial, grad, accumulate, stream);
  if (t == DType::BF16)
    return launch_typed<__nv_bfloat16>(batch, dz, ld_dz, rows, x, ld_x, cols, partial, grad, accumulate, stream);
  throw UnsupportedError("internal: fused MLP dtype " + to_string(t));
}

}  // namespace tinyfuse::cuda::fused
