// The value of one (record, level) item of a grid: where its input falls, which entries its
// corners read and their interpolated sum. The grid's forward kernel (grid_forward.cu) and the
// fused grid -> MLP inference (fused/general/grid_forward.cu) both evaluate items with
// interpolate(), so their features are the same bits.
#pragma once

#include "cuda/encodings/grid_device.cuh"

namespace tinyfuse::cuda::grid {

// Where the table is 16-byte aligned (`pairs`), the two ends of a cell along axis 0 are neighbours
// in a Dense or Tiled level, and the tiny-cuda-nn hashes multiply axis 0 by 1, so x and x + 1 differ
// in their low bits alone unless the carry runs past an aligned 16-byte window: where both lie in
// one window, one 16-byte load brings both (with W entries to a window, 1 - 1/W of the pairs; for
// two FP16 features 1.25 loads a pair where aligned pairs alone took 1.5).

// The features of entries e0 and e1, one pair at a time (the 3-D cells' order).
template <typename T, uint32_t F>
__device__ __forceinline__ void load_feature_pair(const T* params, uint32_t e0, uint32_t e1, bool vec, bool pairs,
                                                  float* f0, float* f1) {
  constexpr uint32_t W = 16 / (F * sizeof(T));  // entries in a 16-byte window
  if constexpr (W >= 2) {
    if (pairs && (e0 ^ e1) < W) {
      const FeatureChunk<T, W * F> window =
          *reinterpret_cast<const FeatureChunk<T, W * F>*>(params + size_t(e0 & ~(W - 1)) * F);
      const uint32_t k0 = e0 & (W - 1), k1 = e1 & (W - 1);
      // Chosen by comparisons with constant indices, not by indexing `window` (which would put it on
      // the stack).
#pragma unroll
      for (uint32_t k = 0; k < W; ++k)
#pragma unroll
        for (uint32_t f = 0; f < F; ++f) {
          const float v = to_float(window.v[k * F + f]);
          if (k == k0) f0[f] = v;
          if (k == k1) f1[f] = v;
        }
      return;
    }
  }
  load_features<T, F>(params + size_t(e0) * F, vec, f0);
  load_features<T, F>(params + size_t(e1) * F, vec, f1);
}

// The interpolated sums over N cells of one level where the table is aligned: every corner's entry
// first, then every load (the far end predicated where it leaves the window), then the sums, so
// all the cells' loads are in flight together (a 2-D cell alone: 32 registers). Same loads and
// bits as the pair order, corner by corner.
// Measured against that order, alternated twice in a call: W1's inference +4.5 / +3.3 % on an
// H200 (2^18 / 2^20), within 1.5 % either way on an H100 (two calls). Not for 3-D cells: ptxas then issues their four pairs
// two at a time at 40 registers, or all four at 46 with a bound of five blocks an SM, and W3's,
// W4's and W4e's inference lost 2-3 % (bound, H200) and 3-5 % (unbound, H100): the kernel is bound
// by the L2's rate (4.7-5.0 TB/s of sectors there), and fewer warps in flight, or the gathered
// order's extra registers and predicates, cost more than the overlap gains.
template <typename T, uint32_t D, uint32_t F, uint32_t N = 1>
__device__ __forceinline__ void sum_corners_gathered(const Launch& g, const LevelInfo& L, const Cell<D> (&c)[N],
                                                     const T* params, float (&acc)[N][F]) {
  constexpr uint32_t W = 16 / (F * sizeof(T));  // entries in a 16-byte window
  constexpr uint32_t P = (1u << D) / 2;         // corner pairs along axis 0
  using Window = FeatureChunk<T, W * F>;
  using Chunk = FeatureChunk<T, F>;
  uint32_t e0[N][P], e1[N][P];
  uint32_t v[D];
#pragma unroll
  for (uint32_t n = 0; n < N; ++n)
#pragma unroll
    for (uint32_t p = 0; p < P; ++p) {
      corner_vertex<D>(c[n], 2 * p, v);
      e0[n][p] = entry_of<D>(g, L, v);
      corner_vertex<D>(c[n], 2 * p + 1, v);
      e1[n][p] = entry_of<D>(g, L, v);
    }
  Window window[N][P];
  Chunk far[N][P];
#pragma unroll
  for (uint32_t n = 0; n < N; ++n)
#pragma unroll
    for (uint32_t p = 0; p < P; ++p) {
      window[n][p] = *reinterpret_cast<const Window*>(params + size_t(e0[n][p] & ~(W - 1)) * F);
      far[n][p] = Chunk{};
      if ((e0[n][p] ^ e1[n][p]) >= W) far[n][p] = *reinterpret_cast<const Chunk*>(params + size_t(e1[n][p]) * F);
    }
#pragma unroll
  for (uint32_t n = 0; n < N; ++n)
#pragma unroll
    for (uint32_t p = 0; p < P; ++p) {
      const uint32_t k0 = e0[n][p] & (W - 1), k1 = e1[n][p] & (W - 1);
      const bool same = (e0[n][p] ^ e1[n][p]) < W;
      float f0[F] = {}, f1[F];
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) f1[f] = to_float(far[n][p].v[f]);
      // Chosen by comparisons with constant indices, not by indexing `window` (which would put it
      // on the stack).
#pragma unroll
      for (uint32_t k = 0; k < W; ++k)
#pragma unroll
        for (uint32_t f = 0; f < F; ++f) {
          const float x = to_float(window[n][p].v[k * F + f]);
          if (k == k0) f0[f] = x;
          if (same && k == k1) f1[f] = x;
        }
      const float w0 = grid_corner_weight<float, D>(c[n].w, 2 * p), w1 = grid_corner_weight<float, D>(c[n].w, 2 * p + 1);
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) acc[n][f] = fmaf(w1, f1[f], fmaf(w0, f0[f], acc[n][f]));
    }
}

// acc[F] (zeroed by the caller) = the interpolated features of cell `c` in level `L`. `vec`: the
// table is aligned to a corner's vector width; `pairs`: to 16 bytes.
template <typename T, uint32_t D, uint32_t F>
__device__ __forceinline__ void interpolate(const Launch& g, const LevelInfo& L, const Cell<D>& c, const T* params,
                                            bool vec, bool pairs, float* acc) {
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
    float sums[1][F] = {};
    sum_corners_gathered<T, D, F, 1>(g, L, {c}, params, sums);
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) acc[f] = sums[0][f];
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
}

}  // namespace tinyfuse::cuda::grid
