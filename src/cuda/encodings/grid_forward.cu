// Grid forward: one thread per (record, level), the level index fastest, so the threads of a warp
// write whole consecutive output rows (coalesced) in the row-major layout the network reads.
#include "cuda/encodings/grid_kernels.cuh"

namespace tinyfuse::cuda::grid {

namespace {

// Where the table is 16-byte aligned (`pairs`), the two ends of a cell along axis 0 are neighbours
// in a Dense or Tiled level, and the tiny-cuda-nn hashes multiply axis 0 by 1, so x and x + 1 differ
// in their low bits alone unless the carry runs past an aligned 16-byte window: where both lie in
// one window, one 16-byte load brings both (with W entries to a window, 1 - 1/W of the pairs; for
// two FP16 features 1.25 loads a pair where aligned pairs alone took 1.5).

// Entries k0 and, where `take1`, k1 of a 16-byte window of W entries into f0 and f1, chosen by
// comparisons with constant indices, not by indexing `window` (which would put it on the stack).
template <typename T, uint32_t W, uint32_t F>
__device__ __forceinline__ void pick_from_window(const FeatureChunk<T, W * F>& window, uint32_t k0, uint32_t k1,
                                                 bool take1, float* f0, float* f1) {
#pragma unroll
  for (uint32_t k = 0; k < W; ++k)
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) {
      const float v = to_float(window.v[k * F + f]);
      if (k == k0) f0[f] = v;
      if (take1 && k == k1) f1[f] = v;
    }
}

// The features of entries e0 and e1, one pair at a time (the 3-D cells' order).
template <typename T, uint32_t F>
__device__ __forceinline__ void load_feature_pair(const T* params, uint32_t e0, uint32_t e1, bool vec, bool pairs,
                                                  float* f0, float* f1) {
  constexpr uint32_t W = 16 / (F * sizeof(T));  // entries in a 16-byte window
  if constexpr (W >= 2) {
    if (pairs && (e0 ^ e1) < W) {
      const FeatureChunk<T, W * F> window =
          *reinterpret_cast<const FeatureChunk<T, W * F>*>(params + size_t(e0 & ~(W - 1)) * F);
      pick_from_window<T, W, F>(window, e0 & (W - 1), e1 & (W - 1), true, f0, f1);
      return;
    }
  }
  load_features<T, F>(params + size_t(e0) * F, vec, f0);
  load_features<T, F>(params + size_t(e1) * F, vec, f1);
}

// The interpolated sum over a 2-D cell's corners where the table is aligned: every corner's entry
// first, then every load (the far end predicated where it leaves the window), then the sums, so
// both pairs' loads are in flight together (32 registers). Same loads and bits as the pair order.
// Measured against that order, alternated twice in a call: W1's inference +4.5 / +3.3 % on an
// H200 (2^18 / 2^20), within 1.5 % either way on an H100 (two calls). Not for 3-D cells: ptxas
// then issues their four pairs two at a time at 40 registers, or all four at 46 with a bound of
// five blocks an SM, and W3's, W4's and W4e's inference lost 2-3 % (bound, H200) and 3-5 %
// (unbound, H100): the kernel is bound by the L2's rate (4.7-5.0 TB/s of sectors there), and fewer
// warps in flight, or the gathered order's extra registers and predicates, cost more than the
// overlap gains.
template <typename T, uint32_t D, uint32_t F>
__device__ __forceinline__ void sum_corners_gathered(const Launch& g, const LevelInfo& L, const Cell<D>& c,
                                                     const T* params, float* acc) {
  constexpr uint32_t W = 16 / (F * sizeof(T));  // entries in a 16-byte window
  constexpr uint32_t P = (1u << D) / 2;         // corner pairs along axis 0
  using Window = FeatureChunk<T, W * F>;
  using Chunk = FeatureChunk<T, F>;
  uint32_t e0[P], e1[P];
  uint32_t v[D];
#pragma unroll
  for (uint32_t p = 0; p < P; ++p) {
    corner_vertex<D>(c, 2 * p, v);
    e0[p] = entry_of<D>(g, L, v);
    corner_vertex<D>(c, 2 * p + 1, v);
    e1[p] = entry_of<D>(g, L, v);
  }
  Window window[P];
  Chunk far[P];
#pragma unroll
  for (uint32_t p = 0; p < P; ++p) {
    window[p] = *reinterpret_cast<const Window*>(params + size_t(e0[p] & ~(W - 1)) * F);
    far[p] = Chunk{};
    if ((e0[p] ^ e1[p]) >= W) far[p] = *reinterpret_cast<const Chunk*>(params + size_t(e1[p]) * F);
  }
#pragma unroll
  for (uint32_t p = 0; p < P; ++p) {
    float f0[F] = {}, f1[F];
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) f1[f] = to_float(far[p].v[f]);
    pick_from_window<T, W, F>(window[p], e0[p] & (W - 1), e1[p] & (W - 1), (e0[p] ^ e1[p]) < W, f0, f1);
    const float w0 = grid_corner_weight<float, D>(c.w, 2 * p), w1 = grid_corner_weight<float, D>(c.w, 2 * p + 1);
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) acc[f] = fmaf(w1, f1[f], fmaf(w0, f0[f], acc[f]));
  }
}

template <typename T, uint32_t D, uint32_t F>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
forward_kernel(Launch g, int64_t batch, const T* __restrict__ params, bool vec, bool pairs,
               const float* __restrict__ x, int64_t ldx, Matrix out, uint32_t n_out, uint32_t padded) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * g.n_levels) return;
  int64_t b;
  uint32_t l;
  record_and_level(i, g.n_levels, b, l);
  const LevelInfo L = g.levels[l];
  const Cell<D> c = locate<D>(x, ldx, b, L.scale, g.interpolation);

  float acc[F] = {};
  float feat[F];
  if (g.interpolation == GridInterpolation::Nearest) {
    load_features<T, F>(params + size_t(entry_of<D>(g, L, c.vertex)) * F, vec, acc);
  } else if constexpr (2 * F * sizeof(T) > 16) {
    // No two entries fit one vector load: one corner at a time, which keeps one corner's
    // features live rather than two (at 8 FP32 features, two spilled on CDNA).
    uint32_t v[D];
#pragma unroll
    for (uint32_t k = 0; k < (1u << D); ++k) {
      corner_vertex<D>(c, k, v);
      load_features<T, F>(params + size_t(entry_of<D>(g, L, v)) * F, vec, feat);
      const float w = grid_corner_weight<float, D>(c.w, k);
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) acc[f] = fmaf(w, feat[f], acc[f]);
    }
  } else if (D == 2 && pairs) {
    sum_corners_gathered<T, D, F>(g, L, c, params, acc);
  } else {
    uint32_t v[D];
    float feat1[F];
#pragma unroll
    for (uint32_t k = 0; k < (1u << D); k += 2) {
      // Corners k and k + 1, the two ends of the cell along axis 0 (the backward's pairs).
      corner_vertex<D>(c, k, v);
      const uint32_t e0 = entry_of<D>(g, L, v);
      corner_vertex<D>(c, k + 1, v);
      const uint32_t e1 = entry_of<D>(g, L, v);
      load_feature_pair<T, F>(params, e0, e1, vec, pairs, feat, feat1);
      const float w0 = grid_corner_weight<float, D>(c.w, k), w1 = grid_corner_weight<float, D>(c.w, k + 1);
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) acc[f] = fmaf(w1, feat1[f], fmaf(w0, feat[f], acc[f]));
    }
  }
#pragma unroll
  for (uint32_t f = 0; f < F; ++f) out.store(b, l * F + f, acc[f]);
  if (l == 0)
    for (uint32_t j = n_out; j < padded; ++j) out.store(b, j, 0.0f);
}

template <typename T>
void launch(const Job& job, const T* params, const float* x, int64_t ldx, Matrix out, uint32_t n_out, uint32_t padded) {
  const int64_t threads = job.batch * job.g.n_levels;
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    forward_kernel<T, D, F><<<blocks_for_threads(threads), kThreadsPerBlock, 0, job.stream>>>(
        job.g, job.batch, params, features_aligned<T, F>(params), reinterpret_cast<uintptr_t>(params) % 16 == 0, x, ldx,
        out, n_out, padded);
  });
  TF_GPU_CHECK_LAUNCH("grid forward_kernel");
}

}  // namespace

void forward(const Job& job, Params params, const float* x, int64_t ldx, Matrix output, uint32_t n_out,
             uint32_t padded) {
  if (job.batch == 0) return;
  if (params.dtype == DType::F16)
    launch(job, static_cast<const __half*>(params.data), x, ldx, output, n_out, padded);
  else
    launch(job, static_cast<const float*>(params.data), x, ldx, output, n_out, padded);
}

}  // namespace tinyfuse::cuda::grid
