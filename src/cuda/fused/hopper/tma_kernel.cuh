// FullyFusedMLP's Hopper inference kernel for the square 64-wide ReLU network (input, hidden and
// output 64 wide, no output activation: the production shape) when its rows can be described by
// tensor maps (hopper/inference.cu decides). The layers are wgmma_kernel.cuh's; what differs is
// how rows move, which is what small batches wait for (the timeline probe found each thread's copy
// instructions delaying the first rows by a microsecond at 2^16, and the tiles' layers waiting
// for them; docs/PERFORMANCE.md):
//  - one thread per warpgroup asks the copy engine (TMA) for a whole 64-row tile (8 KB) at a
//    time, 128-byte swizzled, completing on a shared-memory barrier; the other threads issue no
//    row copies at all, so the first rows are requested as the kernel starts, and the next
//    tile is requested when the current one has landed;
//  - the first layer reads its A operand straight from that tile by descriptor (wgmma with both
//    operands in shared memory: the same products as from registers, bit for bit);
//  - the output goes through a swizzled shared tile (stmatrix, conflict free) and back to global
//    memory by one tensor store per tile, which the warps do not wait for; two output tiles per
//    warpgroup, so a tile's store overlaps the next tile's layers.
// Partial last tiles need no bounds: the copy engine fills rows past the batch with zeros and
// does not store them. Weights are staged as in wgmma_kernel.cuh.
#pragma once

#include <cstdint>

#include "cuda/primitives/tma.cuh"
#include "cuda/fused/hopper/wgmma_kernel.cuh"

namespace tinyfuse::cuda::fused::wgmma {

constexpr int kTmaWidth = 64;
constexpr int kTmaTileBytes = kGroupRows * kTmaWidth * 2;  // a 64-row tile of FP16/BF16
constexpr int kTmaStages = 2;                              // input tiles per warpgroup (one landing, one in use)
constexpr int kTmaOutTiles = 2;                            // output tiles per warpgroup
constexpr int kTmaGroups = 2;                              // warpgroups per block (two blocks per SM)

// Shared bytes: alignment slack, the weights, each warpgroup's tiles, then its barriers.
__host__ __device__ constexpr size_t tma_smem_bytes(int weights_bytes, int groups) {
  return 1024 + static_cast<size_t>(weights_bytes) +
         static_cast<size_t>(groups) * ((kTmaStages + kTmaOutTiles) * kTmaTileBytes + kTmaStages * 8);
}

// The 16-byte chunk `chunk` of row `row` of a 128-byte-swizzled tile (the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B and wgmma reads by descriptor).
__device__ __forceinline__ uint32_t swizzled_chunk(uint32_t tile, int row, int chunk) {
  return tile + row * 128 + ((chunk ^ (row & 7)) << 4);
}

template <typename T, Epilogue HIDDEN, Epilogue OUT>
__global__ void __launch_bounds__(kTmaGroups * kGroupThreads, 2)
    tma_inference_kernel(const __grid_constant__ CUtensorMap in_map, const __grid_constant__ CUtensorMap out_map,
                         KernelShape s, const uint16_t* weights, TmaPlan p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int KS = kTmaWidth / 16;
  constexpr int kLayerBytes = layer_bytes(kTmaWidth, kTmaWidth);
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t w_base = (px::shared_address(smem) + 1023u) & ~1023u;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int groups = blockDim.x / kGroupThreads, group = warp / 4, warp_in_group = warp % 4;
  const bool leader = threadIdx.x % kGroupThreads == 0;
  const uint32_t tiles = w_base + p.weights_bytes + group * (kTmaStages + kTmaOutTiles) * kTmaTileBytes;
  const uint32_t outs = tiles + kTmaStages * kTmaTileBytes;
  const uint32_t bars = w_base + p.weights_bytes + groups * (kTmaStages + kTmaOutTiles) * kTmaTileBytes + group * kTmaStages * 8;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int64_t step = static_cast<int64_t>(gridDim.x) * groups;
  const int64_t n_tiles = p.n_tiles;
  const int barrier_id = 1 + group;  // the warpgroup's own hardware barrier (0 is __syncthreads)
  TF_TIMELINE_MARK(kMarkEntry);
  // The tile in stage `st` (its barrier's bytes: one tile).
  auto request = [&](int st, int64_t tile) {
    tma::mbarrier_arrive_expect_tx(bars + 8 * st, kTmaTileBytes);
    tma::load_2d(tiles + st * kTmaTileBytes, &in_map, 0, static_cast<int>(tile * kGroupRows), bars + 8 * st);
  };

  // The leader asks for the first tile before anything else.
  if (leader) {
    tma::prefetch_map(&in_map);
    tma::prefetch_map(&out_map);
    for (int st = 0; st < kTmaStages; ++st) tma::mbarrier_init(bars + 8 * st, 1);
    tma::fence_barrier_init();
    if (first < n_tiles) request(0, first);
  }
  stage_full_rows<kTmaWidth>(w_base, weights, (s.n_hidden + 1) * kTmaWidth);
  px::cp_async_commit();
  TF_TIMELINE_MARK(kMarkIssued);
  px::cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();  // the weights and the barriers' initialisation, for every thread
  TF_TIMELINE_MARK(kMarkStaged);

  // This lane's stmatrix row (within the tile) and its chunk offset (0 or 1) in a 16-column block.
  const int out_row = warp_in_group * kWarpRows + (lane & 7) + ((lane >> 3) & 1) * 8, out_half = lane >> 4;
  int n = 0;
  for (int64_t tile = first; tile < n_tiles; tile += step, ++n) {
    const int st = n % kTmaStages;
    const uint32_t in_tile = tiles + st * kTmaTileBytes;
    tma::mbarrier_wait(bars + 8 * st, (n / kTmaStages) & 1);
    if (n < kMarkTiles) TF_TIMELINE_MARK(kMarkTile + 3 * n);
    // The next tile now, not sooner: with one tile per warpgroup in flight the first tiles land
    // before the DRAM queues fill with later ones (measured faster at 2^16 and from 2^20 on than
    // asking for two at once, docs/PERFORMANCE.md). Its stage's tile was read an iteration ago.
    if (leader && tile + step < n_tiles) request((n + 1) % kTmaStages, tile + step);

    float d[kTmaWidth / 2];
    fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
      wgmma_ss<T, kTmaWidth>(d, b_descriptor(in_tile + ks * 32), b_step(w_base, kTmaWidth, 0, ks), ks > 0 ? 1 : 0);
    commit();
    wait_all();
    // Every warp's products have read the tile before the leader reuses its stage.
    tma::named_sync(barrier_id, kGroupThreads);
    uint32_t a[KS][4];
    const uint32_t w = hidden_layers<T, kTmaWidth, HIDDEN>(a, d, w_base + kLayerBytes, s);
    product<T, kTmaWidth, KS>(d, a, w, kTmaWidth, 0);
    to_fragments<T, kTmaWidth, OUT>(a, d, s.out_act);
    if (n < kMarkTiles) TF_TIMELINE_MARK(kMarkTile + 3 * n + 1);

    // Out through this tile's output buffer, once the store that used it two tiles ago has read it.
    const uint32_t out_tile = outs + (n % kTmaOutTiles) * kTmaTileBytes;
    if (leader) tma::store_wait_read<kTmaOutTiles - 1>();
    tma::named_sync(barrier_id, kGroupThreads);
#pragma unroll
    for (int j = 0; j < KS; ++j) px::stmatrix_x4(swizzled_chunk(out_tile, out_row, 2 * j + out_half), a[j]);
    tma::fence_shared_to_async();
    tma::named_sync(barrier_id, kGroupThreads);
    if (leader) {
      tma::store_2d(&out_map, 0, static_cast<int>(tile * kGroupRows), out_tile);
      tma::store_commit();
    }
    if (n < kMarkTiles) TF_TIMELINE_MARK(kMarkTile + 3 * n + 2);
  }
  // The stores must have read their shared memory before it ends with the block; their writes to
  // global memory need no wait here (the grid's completion covers them, as for any store).
  if (leader) tma::store_wait_read<0>();
  TF_TIMELINE_MARK(kMarkEnd);
#else
  __trap();  // built for sm_90a only; hopper/inference.cu launches it on compute capability 9.0 only
#endif
}

}  // namespace tinyfuse::cuda::fused::wgmma
