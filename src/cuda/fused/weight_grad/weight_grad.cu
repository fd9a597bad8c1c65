// Weight gradients of the fused MLP: dW (out x in) = dZ^T X summed over the batch, after the
// fused backward kernel has written every layer's dZ.
//
// Why a follow-up kernel: the sum runs over the whole batch, so inside the fused kernel every
// block needs its own out x in FP32 partial in shared memory (atomics are not deterministic).
// That fits for the 64-wide ReLU shapes of pipelined/backward_weight_grads_kernel.cuh, which then only
// uses this file's reduction; for every other shape the batch is cut into chunks fixed by the batch size alone;
// one block per (64 x 64 tile of dW, chunk) multiplies on tensor cores (FP16/BF16 operands,
// FP32 accumulators) into an FP32 partial, and a second kernel adds the chunks in an order fixed
// by their count: the result is bitwise repeatable, and the only rounding to T is the final one.
// The layers of a backward share the two launches (up to kWeightGradLayersPerLaunch at a time):
// one grid over every layer's tiles, one reduction over every layer's elements.
//
// Operands from the row-major (batch x features) matrices, both through ldmatrix .trans:
//   A (m = out, k = batch row) = dZ^T: stored rows are k, 8 consecutive m per 16 bytes;
//   B (k = batch row, n = in)  = X:    stored rows are k, 8 consecutive n per 16 bytes.
//
// HIP builds compile a plain FP32 partial kernel instead (below; no matrix cores, so it compiles with
// Debian's HIP): the same blocks, chunks, partial layout and reduction, hence the same
// determinism. Everything but the partial kernel and its block size is shared.
#include <algorithm>

#include "cuda/fused/kernel_common.cuh"
#if !defined(TINYFUSE_WITH_HIP)
#include "cuda/primitives/mma.cuh"
#include "cuda/primitives/cp_async.cuh"
#include "cuda/primitives/ldmatrix.cuh"
#include "cuda/primitives/mma_sync.cuh"
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

// The layers of one launch, as the kernels get them (by value): layer l owns the tiles
// [tile_begin[l], tile_begin[l + 1]) of the partial grid's x dimension and the elements
// [elem_begin[l], elem_begin[l + 1]) of the reduction; its partials start at partial_begin[l].
struct LayerSet {
  WeightGradLayer layer[kWeightGradLayersPerLaunch];
  int64_t tile_begin[kWeightGradLayersPerLaunch + 1];
  int64_t elem_begin[kWeightGradLayersPerLaunch + 1];
  int64_t partial_begin[kWeightGradLayersPerLaunch];
  int n;
};

// The layer whose range [begin[l], begin[l + 1]) holds i (n is small: a scan).
__device__ __forceinline__ int layer_of(const int64_t (&begin)[kWeightGradLayersPerLaunch + 1], int n, int64_t i) {
  int l = 0;
  while (l + 1 < n && i >= begin[l + 1]) ++l;
  return l;
}

// What a block of the partial-product grid works on: its layer's operands, its 64 x 64 tile of
// dW (first row m0, first column n0), the layer's partials ([chunk][rows][cols]) and its chunk of
// the batch (rows r_begin .. r_end - 1). Both partial kernels (CUDA and HIP) unpack it.
template <typename T>
struct BlockTile {
  const T *dz, *x;
  int64_t ld_dz, ld_x;
  int rows, cols, m0, n0;
  float* partial;
  int64_t chunk, r_begin, r_end;
};
template <typename T>
__device__ __forceinline__ BlockTile<T> block_tile(const LayerSet& set, float* partials, int64_t batch,
                                                   int64_t chunk_rows) {
  const int l = layer_of(set.tile_begin, set.n, blockIdx.x);
  const WeightGradLayer& layer = set.layer[l];
  const int tiles_n = (layer.cols + kTile - 1) / kTile;
  const int local = static_cast<int>(blockIdx.x - set.tile_begin[l]);
  const int64_t chunk = blockIdx.y, r_begin = chunk * chunk_rows;
  return {static_cast<const T*>(layer.dz), static_cast<const T*>(layer.x), layer.ld_dz, layer.ld_x,
          layer.rows, layer.cols, (local / tiles_n) * kTile, (local % tiles_n) * kTile,
          partials + set.partial_begin[l], chunk, r_begin, std::min(batch, r_begin + chunk_rows)};
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
    for (int i = 0; i < 2; ++i) ptx::ldmatrix_x4_trans(a[i], ptx::shared_address(&s_dz[16 * ks + (q / 2) * 8 + r8][wm + 16 * i + (q % 2) * 8]));
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, ptx::shared_address(&s_x[16 * ks + (q % 2) * 8 + r8][wn + 16 * j + (q / 2) * 8]));
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
    weight_grad_partial_kernel(int64_t batch, LayerSet set, int64_t chunk_rows, float* partials) {
  static_assert(kWarpsPerBlock == 4, "a block is 2 x 2 warps of 32 x 32");
  __shared__ __align__(16) T s_dz[kPipe][kStepRows][kStride];
  __shared__ __align__(16) T s_x[kPipe][kStepRows][kStride];
  const auto [dz, x, ld_dz, ld_x, rows, cols, m0, n0, partial, chunk, r_begin, r_end] =
      block_tile<T>(set, partials, batch, chunk_rows);
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

// The HIP partial kernel: plain FP32 arithmetic, no matrix cores (simpler; written before the
// matrix-core builtins path of primitives/amd_matrix_ops.cuh). It is slower than a matrix-core
// kernel would be; one on those builtins is for after a measurement on AMD hardware says the
// weight gradient's share of a training step matters.
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
    weight_grad_partial_kernel(int64_t batch, LayerSet set, int64_t chunk_rows, float* partials) {
  __shared__ __align__(16) T s_dz[kStepRows][kStride];
  __shared__ __align__(16) T s_x[kStepRows][kStride];
  const auto [dz, x, ld_dz, ld_x, rows, cols, m0, n0, partial, chunk, r_begin, r_end] =
      block_tile<T>(set, partials, batch, chunk_rows);
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

// grad[e] = [grad +] the sum over chunks of partial[chunk][e], for every element of every layer.
// Latency-bound (a few thousand elements, hundreds of chunks each), so each element's chunks are
// cut into kReduceSlices runs of consecutive chunks, one thread per run (its loads issued
// kReduceBatch at a time); the runs' sums meet in shared memory and are added in run order. The
// order depends on the chunk count alone: bitwise repeatable.
constexpr int kReduceBatch = 8;
constexpr int kReduceElems = 32;  // elements per block (threadIdx.x: a warp reads 128 bytes)
constexpr int kReduceSlices = 8;  // runs of chunks per element (threadIdx.y)

template <typename T>
__global__ void __launch_bounds__(kReduceElems* kReduceSlices)
    weight_grad_reduce_kernel(int64_t chunks, LayerSet set, const float* partials, bool accumulate) {
  __shared__ float run_sums[kReduceSlices][kReduceElems];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kReduceElems + threadIdx.x;
  const bool valid = i < set.elem_begin[set.n];
  const int l = layer_of(set.elem_begin, set.n, valid ? i : 0);
  const int64_t elems = static_cast<int64_t>(set.layer[l].rows) * set.layer[l].cols, e = i - set.elem_begin[l];
  const float* partial = partials + set.partial_begin[l];
  const int64_t per_run = (chunks + kReduceSlices - 1) / kReduceSlices;
  const int64_t c_begin = threadIdx.y * per_run, c_end = c_begin + per_run < chunks ? c_begin + per_run : chunks;
  float s = 0.0f;
  if (valid) {
    int64_t c = c_begin;
    for (; c + kReduceBatch <= c_end; c += kReduceBatch) {
      float v[kReduceBatch];
#pragma unroll
      for (int k = 0; k < kReduceBatch; ++k) v[k] = partial[(c + k) * elems + e];
#pragma unroll
      for (int k = 0; k < kReduceBatch; ++k) s += v[k];
    }
    for (; c < c_end; ++c) s += partial[c * elems + e];
  }
  run_sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (!valid || threadIdx.y != 0) return;
  float total = 0.0f;
#pragma unroll
  for (int r = 0; r < kReduceSlices; ++r) total += run_sums[r][threadIdx.x];
  T* grad = static_cast<T*>(set.layer[l].grad);
  grad[e] = from_float<T>(accumulate ? to_float(grad[e]) + total : total);
}

LayerSet layer_set(int64_t chunks, const WeightGradLayer* layers, int n) {
  LayerSet set{};
  set.n = n;
  int64_t tiles = 0, elems = 0;
  for (int l = 0; l < n; ++l) {
    set.layer[l] = layers[l];
    set.tile_begin[l] = tiles;
    set.elem_begin[l] = elems;
    set.partial_begin[l] = chunks * elems;
    tiles += static_cast<int64_t>((layers[l].rows + kTile - 1) / kTile) * ((layers[l].cols + kTile - 1) / kTile);
    elems += static_cast<int64_t>(layers[l].rows) * layers[l].cols;
  }
  set.tile_begin[n] = tiles;
  set.elem_begin[n] = elems;
  return set;
}

template <typename T>
void launch_reduce(int64_t chunks, const LayerSet& set, const float* partial, bool accumulate, gpuStream_t stream) {
  const int64_t elems = set.elem_begin[set.n];
  weight_grad_reduce_kernel<T><<<static_cast<unsigned>((elems + kReduceElems - 1) / kReduceElems),
                                 dim3(kReduceElems, kReduceSlices), 0, stream>>>(chunks, set, partial, accumulate);
  TF_GPU_CHECK_LAUNCH("weight_grad_reduce_kernel");
}

template <typename T>
void launch_typed(int64_t batch, const WeightGradLayer* layers, int n, float* partial, bool accumulate, gpuStream_t stream) {
  const Split split = split_batch(batch);
  const LayerSet set = layer_set(split.chunks, layers, n);
  const dim3 grid(static_cast<unsigned>(set.tile_begin[n]), static_cast<unsigned>(split.chunks));
#if !defined(TINYFUSE_WITH_HIP)
  weight_grad_partial_kernel<T><<<grid, kWarpsPerBlock * kWarpSize, 0, stream>>>(batch, set, split.chunk_rows, partial);
#else
  weight_grad_partial_kernel<T><<<grid, kPartialThreads, 0, stream>>>(batch, set, split.chunk_rows, partial);
#endif
  TF_GPU_CHECK_LAUNCH("weight_grad_partial_kernel");
  launch_reduce<T>(split.chunks, set, partial, accumulate, stream);
}

}  // namespace

size_t weight_grad_partial_floats(int64_t batch, const WeightGradLayer* layers, int n) {
  size_t elems = 0;
  for (int l = 0; l < n; ++l) elems += static_cast<size_t>(layers[l].rows) * layers[l].cols;
  return static_cast<size_t>(split_batch(batch).chunks) * elems;
}

void launch_weight_gradients(DType t, int64_t batch, const WeightGradLayer* layers, int n, float* partial,
                             bool accumulate, gpuStream_t stream) {
  if (batch <= 0) throw UnsupportedError("internal: weight gradient of an empty batch");
  if (n < 1 || n > kWeightGradLayersPerLaunch)
    throw UnsupportedError("internal: " + std::to_string(n) + " layers in one weight-gradient launch");
  if (t == DType::F16) return launch_typed<__half>(batch, layers, n, partial, accumulate, stream);
  if (t == DType::BF16) return launch_typed<__nv_bfloat16>(batch, layers, n, partial, accumulate, stream);
  throw UnsupportedError("internal: fused MLP dtype " + to_string(t));
}

void launch_weight_grad_reduce(DType t, int64_t chunks, const WeightGradLayer* layers, int n, const float* partial,
                               bool accumulate, gpuStream_t stream) {
  if (chunks <= 0 || n < 1 || n > kWeightGradLayersPerLaunch)
    throw UnsupportedError("internal: weight-gradient reduction of " + std::to_string(chunks) + " chunks, " +
                           std::to_string(n) + " layers");
  const LayerSet set = layer_set(chunks, layers, n);
  if (t == DType::F16) return launch_reduce<__half>(chunks, set, partial, accumulate, stream);
  if (t == DType::BF16) return launch_reduce<__nv_bfloat16>(chunks, set, partial, accumulate, stream);
  throw UnsupportedError("internal: fused MLP dtype " + to_string(t));
}

}  // namespace tinyfuse::cuda::fused
