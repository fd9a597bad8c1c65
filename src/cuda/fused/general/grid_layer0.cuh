// Layer 0's A fragments from a grid (the fused grid -> MLP inference, FusedKernel::GeneralGridInput).
// With two features a level, the m16n8k16 A fragment a lane holds for k-step ks (rows r and r + 8,
// columns 16 ks + 2t, + 1 and 16 ks + 2t + 8, + 9, t = lane % 4) is exactly the features of levels
// 8 ks + t and 8 ks + t + 4 of those two rows: each lane evaluates its four (row, level) items with
// the grid forward's own interpolate() and rounds them to FP16 as that kernel's store does, so
// layer 0 multiplies the same bits the two-kernel path reads back from memory, and the features
// never leave the registers.
#pragma once

#include "cuda/encodings/grid_interpolate.cuh"
#include "cuda/fused/grid_input.h"
#include "cuda/primitives/mma.cuh"

namespace tinyfuse::cuda::fused {

// The most k-steps of grid features a kernel takes: 32 levels of two features.
constexpr int kGridMaxKSteps = 4;

#if !defined(TINYFUSE_WITH_HIP)

// The packed FP16 features of (row, level); 0 past the batch and for the padding columns past the
// last level (the grid writes 0 there).
template <uint32_t D>
__device__ __forceinline__ uint32_t grid_item(const GridInput& in, int64_t row, uint32_t level, int64_t batch) {
  if (row >= batch || level >= in.g.n_levels) return 0u;
  const grid::LevelInfo L = in.g.levels[level];
  const grid::Cell<D> c = grid::locate<D>(in.x, in.ldx, row, L.scale, in.g.interpolation);
  float acc[2] = {};
  grid::interpolate<__half, D, 2>(in.g, L, c, static_cast<const __half*>(in.params), in.vec, in.pairs, acc);
  return pack2<__half>(acc[0], acc[1]);
}

// The packed features of rows r and r + 8 in one level, their loads in flight together
// (grid::sum_corners_gathered over both cells; the same bits as grid_item's). Rows past the batch
// read row 0's cell and give 0.
template <uint32_t D>
__device__ __forceinline__ void grid_level_pair(uint32_t& lo, uint32_t& hi, const GridInput& in, int64_t r,
                                                uint32_t level, int64_t batch) {
  if (level >= in.g.n_levels) {
    lo = hi = 0u;
    return;
  }
  const grid::LevelInfo L = in.g.levels[level];
  const grid::Cell<D> c[2] = {grid::locate<D>(in.x, in.ldx, r < batch ? r : 0, L.scale, in.g.interpolation),
                              grid::locate<D>(in.x, in.ldx, r + 8 < batch ? r + 8 : 0, L.scale, in.g.interpolation)};
  float acc[2][2] = {};
  grid::sum_corners_gathered<__half, D, 2, 2>(in.g, L, c, static_cast<const __half*>(in.params), acc);
  lo = r < batch ? pack2<__half>(acc[0][0], acc[0][1]) : 0u;
  hi = r + 8 < batch ? pack2<__half>(acc[1][0], acc[1][1]) : 0u;
}

// a = the A fragment of rows [r, r + 16) and k-step ks, lane (g, t): r = row0 + 16 m + g.
template <uint32_t D>
__device__ __forceinline__ void grid_fragment(uint32_t (&a)[4], const GridInput& in, int64_t r, int ks, int t,
                                              int64_t batch) {
  const uint32_t level = 8 * ks + t;
  if (in.pairs && in.g.interpolation != GridInterpolation::Nearest) {
    grid_level_pair<D>(a[0], a[1], in, r, level, batch);
    grid_level_pair<D>(a[2], a[3], in, r, level + 4, batch);
    return;
  }
  a[0] = grid_item<D>(in, r, level, batch);
  a[1] = grid_item<D>(in, r + 8, level, batch);
  a[2] = grid_item<D>(in, r, level + 4, batch);
  a[3] = grid_item<D>(in, r + 8, level + 4, batch);
}

#endif  // !TINYFUSE_WITH_HIP

}  // namespace tinyfuse::cuda::fused
