// FullyFusedMLP's Hopper inference kernel for the square 64-wide ReLU network (input, hidden and
// output 64 wide, no output activation: the production shape) when its rows can be described by
// tensor maps (wgmma_inference.cu decides). The layers are wgmma_kernel.cuh's; what differs is
// how rows move, which is what small batches wait for (docs/PERFORMANCE.md, 2026-12-04 eighth
// session: the timeline probe found the row copies' instructions and the stage round trip, not
// the arithmetic, holding the tiles back):
//  - one thread per warpgroup asks the copy engine (TMA) for a whole 64-row tile (8 KB) at a
//    time, 128-byte swizzled, completing on a shared-memory barrier; the other threads issue no
//    copy instructions at all, so the first rows are requested as the kernel starts;
//  - the first layer reads its A operand straight from that tile by descriptor (wgmma with both
//    operands in shared memory: the same products as from registers, bit for bit);
//  - the output goes through a swizzled shared tile (stmatrix, conflict free) and back to global
//    memory by one tensor store per tile, which the warps do not wait for; two output tiles per
//    warpgroup, so a tile's store overlaps the next tile's layers.
// Partial last tiles need no bounds: the copy engine fills rows past the batch with zeros and
// does not store them. Weights are staged as in wgmma_kernel.cuh.
#pragma once

#include <cstdint>

#include "cuda/fused/tma_ops.cuh"
#include "cuda/fused/wgmma_kernel.cuh"

namespace tinyfuse::cuda::fused::wgmma {

constexpr int kTmaWidth = 64;
constexpr int kTmaTileBytes = kGroupRows * kTmaWidth * 2;  // a 64-row tile of FP16/BF16
constexpr int kTmaStages = 2;                              // input tiles in flight per warpgroup
constexpr int kTmaOutTiles = 2;                            // output tiles per warpgroup
constexpr int kTmaGroups = 2;                              // warpgroups per block (two blocks per SM)

struct TmaPlan {
  int weights_bytes;  // every layer, swizzled (a multiple of 1024)
  int64_t n_tiles;
};

// Shared bytes: alignment slack, the weights, each warpgroup's tiles, then its barriers.
__host__ __device__ constexpr size_t tma_smem_bytes(int weights_bytes, int groups, int out_tiles = kTmaOutTiles) {
  return 1024 + static_cast<size_t>(weights_bytes) +
         static_cast<size_t>(groups) * ((kTmaStages + out_tiles) * kTmaTileBytes + kTmaStages * 8) + 8;
}

// The 16-byte chunk `chunk` of row `row` of a 128-byte-swizzled tile (the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B and wgmma reads by descriptor).
__device__ __forceinline__ uint32_t swizzled_chunk(uint32_t tile, int row, int chunk) {
  return tile + row * 128 + ((chunk ^ (row & 7)) << 4);
}

// Experiments (timeline probe): OUT_TILES output tiles per warpgroup, launch bounds for
// BLOCKS_PER_SM blocks, EAGER: both input stages requested at the start and a stage refilled as
// soon as its tile is read (else the next tile is requested when the current one has landed).
// W_TMA: the weights come by tensor copies too (w_map: the layers' rows, 64 at a time).
template <typename T, Epilogue HIDDEN, Epilogue OUT, typename PROBE = NoProbe, int OUT_TILES = kTmaOutTiles,
          int BLOCKS_PER_SM = 2, bool EAGER = true, bool W_TMA = false>
__global__ void __launch_bounds__(kTmaGroups * kGroupThreads, BLOCKS_PER_SM)
    tma_inference_kernel(const __grid_constant__ CUtensorMap in_map, const __grid_constant__ CUtensorMap out_map,
                         const __grid_constant__ CUtensorMap w_map, KernelShape s, const uint16_t* weights, TmaPlan p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int KS = kTmaWidth / 16;
  constexpr int kLayerBytes = layer_bytes(kTmaWidth, kTmaWidth);
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t w_base = (px::shared_address(smem) + 1023u) & ~1023u;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int groups = blockDim.x / kGroupThreads, group = warp / 4, warp_in_group = warp % 4;
  const bool leader = threadIdx.x % kGroupThreads == 0;
  const uint32_t tiles = w_base + p.weights_bytes + group * (kTmaStages + OUT_TILES) * kTmaTileBytes;
  const uint32_t outs = tiles + kTmaStages * kTmaTileBytes;
  const uint32_t bars = w_base + p.weights_bytes + groups * (kTmaStages + OUT_TILES) * kTmaTileBytes + group * kTmaStages * 8;
  const uint32_t w_bar = w_base + p.weights_bytes + groups * ((kTmaStages + OUT_TILES) * kTmaTileBytes + kTmaStages * 8);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int64_t step = static_cast<int64_t>(gridDim.x) * groups;
  const int64_t n_tiles = p.n_tiles;
  const int barrier_id = 1 + group;  // the warpgroup's own hardware barrier (0 is __syncthreads)
  PROBE::at(kMarkEntry);

  // The leader asks for the first tiles before anything else.
  if (leader) {
    tma::prefetch_map(&in_map);
    tma::prefetch_map(&out_map);
    for (int st = 0; st < kTmaStages; ++st) tma::mbarrier_init(bars + 8 * st, 1);
    tma::fence_barrier_init();
    for (int st = 0; st < (EAGER ? kTmaStages : 1); ++st) {
      const int64_t tile = first + st * step;
      if (tile >= n_tiles) break;
      tma::mbarrier_arrive_expect_tx(bars + 8 * st, kTmaTileBytes);
      tma::load_2d(tiles + st * kTmaTileBytes, &in_map, 0, static_cast<int>(tile * kGroupRows), bars + 8 * st);
    }
  }
  if constexpr (W_TMA) {
    if (threadIdx.x == 0) {
      tma::prefetch_map(&w_map);
      tma::mbarrier_init(w_bar, 1);
      tma::fence_barrier_init();
      tma::mbarrier_arrive_expect_tx(w_bar, (s.n_hidden + 1) * kLayerBytes);
      for (int l = 0; l <= s.n_hidden; ++l) tma::load_2d(w_base + l * kLayerBytes, &w_map, 0, l * kTmaWidth, w_bar);
    }
    PROBE::at(kMarkIssued);
    __syncthreads();  // the barriers' initialisation, for every thread
    tma::mbarrier_wait(w_bar, 0);
  } else {
    stage_full_rows<kTmaWidth>(w_base, weights, (s.n_hidden + 1) * kTmaWidth);
    px::cp_async_commit();
    PROBE::at(kMarkIssued);
    px::cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();  // the weights and the barriers' initialisation, for every thread
  }
  PROBE::at(kMarkStaged);

  // This lane's stmatrix row (within the tile) and its chunk offset (0 or 1) in a 16-column block.
  const int out_row = warp_in_group * kWarpRows + (lane & 7) + ((lane >> 3) & 1) * 8, out_half = lane >> 4;
  int n = 0;
  for (int64_t tile = first; tile < n_tiles; tile += step, ++n) {
    const int st = n % kTmaStages;
    const uint32_t in_tile = tiles + st * kTmaTileBytes;
    tma::mbarrier_wait(bars + 8 * st, (n / kTmaStages) & 1);
    if (n < kMarkTiles) PROBE::at(kMarkTile + 3 * n);
    if constexpr (!EAGER) {  // the other stage's tile was read an iteration ago
      const int64_t next = tile + step;
      const int other = (n + 1) % kTmaStages;
      if (leader && next < n_tiles) {
        tma::mbarrier_arrive_expect_tx(bars + 8 * other, kTmaTileBytes);
        tma::load_2d(tiles + other * kTmaTileBytes, &in_map, 0, static_cast<int>(next * kGroupRows), bars + 8 * other);
      }
    }

    float d[kTmaWidth / 2];
    fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
      wgmma_ss<T, kTmaWidth>(d, b_descriptor(in_tile + ks * 32), b_step(w_base, kTmaWidth, 0, ks), ks > 0 ? 1 : 0);
    commit();
    wait_all();
    // Every warp's products have read the tile: its stage takes the tile after next.
    tma::named_sync(barrier_id, kGroupThreads);
    if (EAGER && leader) {
      const int64_t next = tile + kTmaStages * step;
      if (next < n_tiles) {
        tma::mbarrier_arrive_expect_tx(bars + 8 * st, kTmaTileBytes);
        tma::load_2d(in_tile, &in_map, 0, static_cast<int>(next * kGroupRows), bars + 8 * st);
      }
    }
    uint32_t a[KS][4];
    to_fragments<T, kTmaWidth, HIDDEN>(a, d, s.act);
    uint32_t w = w_base + kLayerBytes;
    for (int l = 1; l < s.n_hidden; ++l, w += kLayerBytes) {
      product<T, kTmaWidth, KS>(d, a, w, kTmaWidth, 0);
      to_fragments<T, kTmaWidth, HIDDEN>(a, d, s.act);
    }
    product<T, kTmaWidth, KS>(d, a, w, kTmaWidth, 0);
    to_fragments<T, kTmaWidth, OUT>(a, d, s.out_act);
    if (n < kMarkTiles) PROBE::at(kMarkTile + 3 * n + 1);

    // Out through this tile's output buffer, once the store that used it two tiles ago has read it.
    const uint32_t out_tile = outs + (n % OUT_TILES) * kTmaTileBytes;
    if (leader) tma::store_wait_read<OUT_TILES - 1>();
    tma::named_sync(barrier_id, kGroupThreads);
#pragma unroll
    for (int j = 0; j < KS; ++j) px::stmatrix_x4(swizzled_chunk(out_tile, out_row, 2 * j + out_half), a[j]);
    tma::fence_shared_to_async();
    tma::named_sync(barrier_id, kGroupThreads);
    if (leader) {
      tma::store_2d(&out_map, 0, static_cast<int>(tile * kGroupRows), out_tile);
      tma::store_commit();
    }
    if (n < kMarkTiles) PROBE::at(kMarkTile + 3 * n + 2);
  }
  if (leader) tma::store_wait_all();  // the stores read shared memory that ends with the block
  PROBE::at(kMarkEnd);
#else
  __trap();  // built for sm_90a only; wgmma_inference.cu launches it on compute capability 9.0 only
#endif
}

}  // namespace tinyfuse::cuda::fused::wgmma
