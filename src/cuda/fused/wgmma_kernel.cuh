// FullyFusedMLP's Hopper inference kernel (sm_90a): the streaming kernel's plan (stream_kernel.cuh)
// with the layers on warpgroup tensor-core products (wgmma.mma_async) instead of per-warp mma.sync.
//  - a persistent grid of blocks of kGroups warpgroups; a warpgroup owns tiles of 64 consecutive
//    rows (16 per warp), tile = the warpgroup's global index + i * all warpgroups;
//  - every layer's weights sit in shared memory once per block in the layout wgmma reads by
//    descriptor: B = W (out x in) is "K-major", in blocks of 64 input columns whose 128-byte rows
//    are 128-byte swizzled (16-byte chunk c of row n at chunk c ^ (n % 8)), each block 1024-byte
//    aligned; a 16-deep k-step is the block's start address + 32 bytes per step;
//  - activations stay in registers: a warp's FP32 accumulators of m64nNk16 have the mma.sync C
//    layout, so rounded pairs are the next layer's A fragments (A from registers);
//  - each warp copies its own 16 input rows global -> shared (16-byte cp.async, two stages) and
//    stores its 16 output rows through the same stage, so warps never wait for each other except
//    inside wgmma (which is warpgroup-wide by definition).
// One layer is one batch of wgmma (in / 16 of them) then a wait: the warpgroups of a block (and
// the blocks' other tiles in flight) keep the tensor cores busy while one finishes its epilogue.
#pragma once

#include <cstdint>

#include "cuda/fused/wgmma_ops.cuh"
#include "cuda/ptx_sm80.cuh"

namespace tinyfuse::cuda::fused::wgmma {

namespace px = tinyfuse::cuda::ptx;

constexpr int kGroupRows = 64;  // rows of a warpgroup tile (m64)
constexpr int kWarpRows = 16;
constexpr int kStageCount = 2;

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes the generic-proxy writes to shared memory (the staged weights) visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Descriptor of a K-major, 128-byte-swizzled B operand at shared address `addr` (16-byte units):
// leading byte offset unused with this swizzle (1), stride byte offset 1024 (8 rows of 128 bytes).
__device__ __forceinline__ uint64_t b_descriptor(uint32_t addr) {
  return (static_cast<uint64_t>((addr & 0x3FFFF) >> 4)) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

// Shared bytes of one layer's weights (n_out x n_in) in the swizzled layout.
__host__ __device__ constexpr int layer_bytes(int n_out, int n_in) { return ((n_in + 63) / 64) * n_out * 128; }

// One layer's weights (row-major n_out x n_in in global memory) into the swizzled layout at
// `dst` (1024-byte aligned), 16 bytes per copy, by the whole block.
__device__ __forceinline__ void stage_layer(uint32_t dst, const uint16_t* w, int n_out, int n_in) {
  const int chunks = n_in / 8;
  for (int i = threadIdx.x; i < n_out * chunks; i += blockDim.x) {
    const int n = i / chunks, c = i - n * chunks;
    const uint32_t at = dst + (c / 8) * n_out * 128 + n * 128 + (((c % 8) ^ (n % 8)) << 4);
    px::cp_async_16(at, w + static_cast<int64_t>(n) * n_in + c * 8, 16u);
  }
}

// ldmatrix / stmatrix address of lane `lane` for the 16 x 16 block at column col0 of a warp's
// 16-row stage (row stride `pitch` bytes): matrices (rows +0, cols +0), (+8, +0), (+0, +8), (+8, +8).
__device__ __forceinline__ uint32_t block_row(uint32_t base, int pitch, int col0, int lane) {
  return base + ((lane & 7) + ((lane >> 3) & 1) * 8) * pitch + (col0 + (lane >> 4) * 8) * 2;
}

// A warp's 16 rows [row0, row0 + 16) of a (batch x width) FP16 matrix into its stage.
__device__ __forceinline__ void load_rows(uint32_t stage, int pitch, const uint16_t* in, int64_t ld, int width,
                                          int64_t row0, int64_t batch, int lane) {
  const int chunks = width / 8;
  for (int i = lane; i < kWarpRows * chunks; i += 32) {
    const int r = i / chunks, c = i - r * chunks;
    const int64_t row = row0 + r;
    const bool valid = row < batch;
    px::cp_async_16(stage + r * pitch + c * 16, in + (valid ? row * ld + c * 8 : 0), valid ? 16u : 0u);
  }
}
__device__ __forceinline__ void store_rows(uint32_t stage, int pitch, uint16_t* out, int64_t ld, int width,
                                           int64_t row0, int64_t batch, int lane) {
  const int chunks = width / 8;
  for (int i = lane; i < kWarpRows * chunks; i += 32) {
    const int r = i / chunks, c = i - r * chunks;
    const int64_t row = row0 + r;
    if (row < batch) px::st_global_streaming_16(out + row * ld + c * 8, px::ld_shared_16(stage + r * pitch + c * 16));
  }
}

// Accumulators of m64nNk16 (N / 2 per thread) -> A fragments of the next layer (N / 16 k-steps).
template <int N, bool RELU>
__device__ __forceinline__ void to_fragments(uint32_t (&a)[N / 16][4], const float (&d)[N / 2]) {
#pragma unroll
  for (int j = 0; j < N / 16; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a[j][i] = RELU ? px::pack_half2_relu(d[8 * j + 2 * i], d[8 * j + 2 * i + 1])
                     : px::pack_half2(d[8 * j + 2 * i], d[8 * j + 2 * i + 1]);
}

// y = x W^T for one layer of K inputs and N outputs on the warpgroup's 64 rows.
template <int N, int K>
__device__ __forceinline__ void layer(float (&d)[N / 2], const uint32_t (&a)[K / 16][4], uint32_t w) {
  fence();
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks)
    wgmma_rs<__half, N>(d, a[ks], b_descriptor(w + (ks / 4) * N * 128 + (ks % 4) * 32), ks > 0 ? 1 : 0);
  commit();
  wait<0>();
}

// The experiment's shape: WIDTH -> WIDTH x n_hidden -> WIDTH, ReLU hidden, identity output, FP16.
template <int WIDTH, int GROUPS>
__global__ void __launch_bounds__(GROUPS * 128, 1)
    mlp_inference_kernel(const __half* __restrict__ weights, int n_hidden, const __half* __restrict__ input,
                         __half* __restrict__ output, int64_t batch, int64_t n_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int KS = WIDTH / 16;
  constexpr int kLayer = layer_bytes(WIDTH, WIDTH);
  constexpr int kPitch = (WIDTH + 8) * 2;
  constexpr int kStage = kWarpRows * kPitch;
  extern __shared__ __align__(1024) unsigned char smem[];
  const int n_layers = n_hidden + 1;
  const uint32_t w_base = (px::shared_address(smem) + 1023u) & ~1023u;  // the swizzle needs 1024-byte blocks
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = warp / 4, wig = warp % 4;
  const uint32_t stages = w_base + n_layers * kLayer + warp * kStageCount * kStage;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * GROUPS + group;
  const int64_t step = static_cast<int64_t>(gridDim.x) * GROUPS;
  const uint16_t* in = reinterpret_cast<const uint16_t*>(input);
  uint16_t* out = reinterpret_cast<uint16_t*>(output);

  for (int s = 0; s < kStageCount; ++s) {
    const int64_t tile = first + s * step;
    if (tile < n_tiles)
      load_rows(stages + s * kStage, kPitch, in, WIDTH, WIDTH, tile * kGroupRows + wig * kWarpRows, batch, lane);
    px::cp_async_commit();
  }
  for (int l = 0; l < n_layers; ++l)
    stage_layer(w_base + l * kLayer, reinterpret_cast<const uint16_t*>(weights) + l * WIDTH * WIDTH, WIDTH, WIDTH);
  px::cp_async_commit();
  px::cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();

  int s = 0;
  for (int64_t tile = first; tile < n_tiles; tile += step) {
    const uint32_t stage = stages + s * kStage;
    const int64_t row0 = tile * kGroupRows + wig * kWarpRows;
    px::cp_async_wait<kStageCount - 1>();
    __syncwarp();
    uint32_t a[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) px::ldmatrix_x4(a[ks], block_row(stage, kPitch, 16 * ks, lane));
    float d[WIDTH / 2];
    for (int l = 0; l < n_hidden; ++l) {
      layer<WIDTH, WIDTH>(d, a, w_base + l * kLayer);
      to_fragments<WIDTH, true>(a, d);
    }
    layer<WIDTH, WIDTH>(d, a, w_base + n_hidden * kLayer);
    to_fragments<WIDTH, false>(a, d);
    __syncwarp();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) px::stmatrix_x4(block_row(stage, kPitch, 16 * ks, lane), a[ks]);
    __syncwarp();
    store_rows(stage, kPitch, out, WIDTH, WIDTH, row0, batch, lane);
    __syncwarp();
    const int64_t next = tile + kStageCount * step;
    if (next < n_tiles)
      load_rows(stage, kPitch, in, WIDTH, WIDTH, next * kGroupRows + wig * kWarpRows, batch, lane);
    px::cp_async_commit();
    s ^= 1;
  }
  px::cp_async_wait<0>();
#else
  __trap();  // built for sm_90a only
#endif
}

template <int WIDTH, int GROUPS>
constexpr size_t inference_smem(int n_hidden) {
  return 1024 + static_cast<size_t>(n_hidden + 1) * layer_bytes(WIDTH, WIDTH) +
         static_cast<size_t>(GROUPS) * 4 * kStageCount * kWarpRows * (WIDTH + 8) * 2;
}

}  // namespace tinyfuse::cuda::fused::wgmma
