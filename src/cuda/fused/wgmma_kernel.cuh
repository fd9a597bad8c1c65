// FullyFusedMLP's Hopper inference kernel (sm_90a; wgmma_inference.cu launches it): the streaming
// kernel's plan (stream_kernel.cuh) with every layer on warpgroup tensor-core products
// (wgmma.mma_async, wgmma_ops.cuh) instead of per-warp mma.sync. Measured against it on an H200
// (benchmarks/experiments/wgmma_probe.cu, docs/PERFORMANCE.md): 1.3x at 64 wide, 2.7x at 128 wide.
//  - a persistent grid of blocks of 1 .. kMaxGroups warpgroups; a warpgroup owns tiles of 64
//    consecutive rows (16 per warp), tile = the warpgroup's global index + i * all warpgroups;
//  - every layer's weights are staged once per block into shared memory in the layout wgmma reads
//    by descriptor: B = W (out x in) "K-major", in blocks of 64 input columns whose 128-byte rows
//    are 128-byte swizzled (16-byte chunk c of row n at chunk c ^ (n % 8)), each block 1024-byte
//    aligned; a 16-deep k-step is the block's start address + 32 bytes per step. Columns past a
//    layer's input width inside its last block are zeros;
//  - activations stay in registers: a warp's FP32 accumulators of m64nNk16 have the mma.sync C
//    layout, so their finished pairs are the next layer's A fragments (A from registers);
//  - each warp copies its own 16 input rows global -> shared (16-byte cp.async, two stages) and
//    writes its 16 output rows back through the same stage with 16-byte streaming stores, so
//    warps never wait for each other except inside wgmma (warpgroup-wide by definition).
// A layer is one batch of wgmma then a wait; the block's other warpgroups keep the tensor cores
// busy meanwhile. Same rounding points as every fused kernel (epilogue.cuh), and the tensor
// cores sum a 16-deep product as they do for mma.sync: the results are the mma.sync kernels'
// bit for bit (measured on the H200 and required by test_fused_wgmma.cpp).
#pragma once

#include <cstdint>

#include "cuda/fused/epilogue.cuh"
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/wgmma_ops.cuh"
#include "cuda/ptx_sm80.cuh"

namespace tinyfuse::cuda::fused::wgmma {

namespace px = tinyfuse::cuda::ptx;

constexpr int kGroupThreads = 128;  // a warpgroup
constexpr int kGroupRows = 64;      // rows of a warpgroup tile (the m of m64nNk16)
constexpr int kWarpRows = 16;
constexpr int kMaxGroups = 3;  // warpgroups per block
constexpr int kBlockCols = 64; // input columns per swizzled weight block (128 bytes of FP16/BF16)

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Makes generic-proxy writes to shared memory (the staged weights) visible to wgmma's reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Descriptor of a K-major, 128-byte-swizzled B operand at shared address `addr`: start address
// in 16-byte units, leading byte offset unused with this swizzle (1), stride byte offset 1024
// (8 rows of 128 bytes), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t b_descriptor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}
// B of k-step ks (16 input columns) for the rows n0.. of a layer with n_out outputs at `w`.
__device__ __forceinline__ uint64_t b_step(uint32_t w, int n_out, int n0, int ks) {
  return b_descriptor(w + (ks / 4) * n_out * 128 + n0 * 128 + (ks % 4) * 32);
}

// Shared bytes of one layer's weights (n_out x n_in) in the swizzled layout.
__host__ __device__ constexpr int layer_bytes(int n_out, int n_in) {
  return (n_in + kBlockCols - 1) / kBlockCols * n_out * 128;
}
__host__ __device__ inline int all_layers_bytes(int width, const KernelShape& s) {
  int bytes = 0;
  for (int l = 0; l <= s.n_hidden; ++l) bytes += layer_bytes(layer_out(width, s, l), layer_in(width, s, l));
  return bytes;
}

// Every layer's weights into the swizzled layout from `w_base` on, by the whole block: 16-byte
// cp.async when the parameters are 16-byte aligned (every layer then starts aligned), else
// element-wise. The caller waits, fences the async proxy and syncs the block.
template <int WIDTH>
__device__ __forceinline__ void stage_weights(uint32_t w_base, const uint16_t* weights, const KernelShape& s) {
  const bool aligned = (reinterpret_cast<uintptr_t>(weights) & 15) == 0;
  uint32_t dst = w_base;
  for (int l = 0; l <= s.n_hidden; ++l) {
    const int n_out = layer_out(WIDTH, s, l), n_in = layer_in(WIDTH, s, l);
    const int chunks = n_in / 8, padded = (n_in + kBlockCols - 1) / kBlockCols * (kBlockCols / 8);
    const uint16_t* src = weights + layer_weight_offset(WIDTH, s, l);
    for (int i = threadIdx.x; i < n_out * padded; i += blockDim.x) {
      const int n = i / padded, c = i - n * padded;
      const uint32_t at = dst + (c / 8) * n_out * 128 + n * 128 + (((c % 8) ^ (n % 8)) << 4);
      const uint16_t* from = src + static_cast<int64_t>(n) * n_in + c * 8;
      if (c >= chunks) {
        px::st_shared_16(at, make_uint4(0, 0, 0, 0));
      } else if (aligned) {
        px::cp_async_16(at, from, 16u);
      } else {
        uint32_t v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = from[2 * k] | (static_cast<uint32_t>(from[2 * k + 1]) << 16);
        px::st_shared_16(at, make_uint4(v[0], v[1], v[2], v[3]));
      }
    }
    dst += layer_bytes(n_out, n_in);
  }
}

// ldmatrix / stmatrix address of lane `lane` for the 16 x 16 block at column col0 of a warp's
// 16-row stage (row stride `pitch` bytes): matrices (rows +0, cols +0), (+8, +0), (+0, +8),
// (+8, +8), the A-fragment register order.
__device__ __forceinline__ uint32_t block_row(uint32_t base, int pitch, int col0, int lane) {
  return base + ((lane & 7) + ((lane >> 3) & 1) * 8) * pitch + (col0 + (lane >> 4) * 8) * 2;
}

// Where lane `lane` starts in the 16-byte chunks of a warp's 16 rows of `width` columns (chunk
// i = lane + 32 j is row i / chunks, chunk i % chunks), and how it steps: worked out once per
// kernel, so the copies below divide by nothing.
struct RowWalk {
  int r0, c0, dr, dc, chunks;
  __device__ RowWalk(int lane, int width)
      : r0(lane / (width / 8)), c0(lane % (width / 8)), dr(kWarpSize / (width / 8)), dc(kWarpSize % (width / 8)),
        chunks(width / 8) {}
};

// A warp's 16 rows [row0, row0 + 16) of a (batch x width) matrix into / out of its stage; rows
// past the batch are zero-filled on load and never stored.
__device__ __forceinline__ void load_rows(uint32_t stage, int pitch, const uint16_t* in, int64_t ld, const RowWalk& w,
                                          int64_t row0, int64_t batch) {
  for (int r = w.r0, c = w.c0; r < kWarpRows;) {
    const int64_t row = row0 + r;
    const bool valid = row < batch;
    px::cp_async_16(stage + r * pitch + c * 16, in + (valid ? row * ld + c * 8 : 0), valid ? 16u : 0u);
    r += w.dr;
    c += w.dc;
    if (c >= w.chunks) {
      c -= w.chunks;
      ++r;
    }
  }
}
__device__ __forceinline__ void store_rows(uint32_t stage, int pitch, uint16_t* out, int64_t ld, const RowWalk& w,
                                           int64_t row0, int64_t batch) {
  for (int r = w.r0, c = w.c0; r < kWarpRows;) {
    const int64_t row = row0 + r;
    if (row < batch) px::st_global_streaming_16(out + row * ld + c * 8, px::ld_shared_16(stage + r * pitch + c * 16));
    r += w.dr;
    c += w.dc;
    if (c >= w.chunks) {
      c -= w.chunks;
      ++r;
    }
  }
}

// Accumulators of m64nNk16 (N / 2 per thread) -> finished A fragments (N / 16 k-steps).
template <typename T, int N, Epilogue E>
__device__ __forceinline__ void to_fragments(uint32_t (&a)[N / 16][4], const float (&d)[N / 2], Activation act) {
#pragma unroll
  for (int j = 0; j < N / 16; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) a[j][i] = finish_pair<T, E>(d[8 * j + 2 * i], d[8 * j + 2 * i + 1], act);
}

// d = x W^T over K = 16 KS inputs, x as A fragments, W (n_out rows) at `w`, output rows n0..n0 + N.
template <typename T, int N, int KS>
__device__ __forceinline__ void product(float (&d)[N / 2], const uint32_t (&x)[KS][4], uint32_t w, int n_out, int n0) {
  fence();
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) wgmma_rs<T, N>(d, x[ks], b_step(w, n_out, n0, ks), ks > 0 ? 1 : 0);
  commit();
  wait_all();
}

// Layer 0 from the stage: in one batch when the input is WIDTH wide, else 64 columns (4 k-steps)
// per batch, the steps past the input width zeros (their weights are zeros too).
template <typename T, int WIDTH>
__device__ __forceinline__ void first_product(float (&d)[WIDTH / 2], uint32_t stage, int pitch, int in_width,
                                              uint32_t w, int lane) {
  constexpr int KS = WIDTH / 16;
  if (in_width == WIDTH) {
    uint32_t x[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) px::ldmatrix_x4(x[ks], block_row(stage, pitch, 16 * ks, lane));
    product<T, WIDTH, KS>(d, x, w, WIDTH, 0);
    return;
  }
  const int steps = in_width / 16;
  for (int k0 = 0; k0 < steps; k0 += 4) {
    uint32_t x[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (k0 + j < steps) {
        px::ldmatrix_x4(x[j], block_row(stage, pitch, 16 * (k0 + j), lane));
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) x[j][i] = 0u;
      }
    }
    fence();
#pragma unroll
    for (int j = 0; j < 4; ++j) wgmma_rs<T, WIDTH>(d, x[j], b_step(w, WIDTH, 0, k0 + j), (k0 + j) > 0 ? 1 : 0);
    commit();
    wait_all();
  }
}

// The output layer into the stage (columns 0 .. out_width - 1): in one batch when it is WIDTH
// wide, else 16 columns at a time.
template <typename T, int WIDTH, Epilogue E>
__device__ __forceinline__ void output_layer(const uint32_t (&x)[WIDTH / 16][4], float (&d)[WIDTH / 2], uint32_t w,
                                             int out_width, uint32_t stage, int pitch, Activation act, int lane) {
  constexpr int KS = WIDTH / 16;
  if (out_width == WIDTH) {
    product<T, WIDTH, KS>(d, x, w, WIDTH, 0);
    uint32_t o[KS][4];
    to_fragments<T, WIDTH, E>(o, d, act);
#pragma unroll
    for (int j = 0; j < KS; ++j) px::stmatrix_x4(block_row(stage, pitch, 16 * j, lane), o[j]);
    return;
  }
  for (int c0 = 0; c0 < out_width; c0 += 16) {
    float c[8];
    product<T, 16, KS>(c, x, w, out_width, c0);
    uint32_t o[1][4];
    to_fragments<T, 16, E>(o, c, act);
    px::stmatrix_x4(block_row(stage, pitch, c0, lane), o[0]);
  }
}

template <typename T, int WIDTH, int STAGES, Epilogue HIDDEN, Epilogue OUT>
__device__ __forceinline__ void inference_body(const KernelShape& s, const ForwardArgs& args, int pitch,
                                               int64_t n_tiles) {
  constexpr int KS = WIDTH / 16;
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t w_base = (px::shared_address(smem) + 1023u) & ~1023u;  // the swizzle works in 1024-byte blocks
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;  // 4 warps per warpgroup
  const int groups = blockDim.x / kGroupThreads, group = warp / 4, warp_in_group = warp % 4;
  const int stage_bytes = kWarpRows * pitch;
  const uint32_t stages = w_base + all_layers_bytes(WIDTH, s) + warp * STAGES * stage_bytes;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int64_t step = static_cast<int64_t>(gridDim.x) * groups;
  const int64_t batch = args.batch;
  const uint16_t* in = static_cast<const uint16_t*>(args.input);
  uint16_t* out = static_cast<uint16_t*>(args.output);
  const int first_layer_bytes = layer_bytes(WIDTH, s.in_width), hidden_bytes = layer_bytes(WIDTH, WIDTH);
  const RowWalk in_walk(lane, s.in_width), out_walk(lane, s.out_width);

  // One commit group per tile, the weights in the first tile's: the first tile starts when its
  // rows and the weights have landed, with the next STAGES - 1 tiles still in flight.
  stage_weights<WIDTH>(w_base, static_cast<const uint16_t*>(args.weights), s);
  for (int st = 0; st < STAGES; ++st) {
    const int64_t tile = first + st * step;
    if (tile < n_tiles)
      load_rows(stages + st * stage_bytes, pitch, in, args.ld_in, in_walk, tile * kGroupRows + warp_in_group * kWarpRows,
                batch);
    px::cp_async_commit();
  }
  px::cp_async_wait<STAGES - 1>();
  fence_proxy_async();
  __syncthreads();

  int st = 0;
  for (int64_t tile = first; tile < n_tiles; tile += step) {
    const uint32_t stage = stages + st * stage_bytes;
    const int64_t row0 = tile * kGroupRows + warp_in_group * kWarpRows;
    px::cp_async_wait<STAGES - 1>();  // this tile's copies (this lane's) have landed
    __syncwarp();                      // ... and every lane's

    float d[WIDTH / 2];
    uint32_t a[KS][4];
    first_product<T, WIDTH>(d, stage, pitch, s.in_width, w_base, lane);
    to_fragments<T, WIDTH, HIDDEN>(a, d, s.act);
    uint32_t w = w_base + first_layer_bytes;
    for (int l = 1; l < s.n_hidden; ++l, w += hidden_bytes) {
      product<T, WIDTH, KS>(d, a, w, WIDTH, 0);
      to_fragments<T, WIDTH, HIDDEN>(a, d, s.act);
    }
    __syncwarp();  // every lane's reads of the input in this stage are done before it is overwritten
    output_layer<T, WIDTH, OUT>(a, d, w, s.out_width, stage, pitch, s.out_act, lane);
    __syncwarp();
    store_rows(stage, pitch, out, args.ld_out, out_walk, row0, batch);
    __syncwarp();  // the stage is read out before the next copy into it

    const int64_t next = tile + STAGES * step;
    if (next < n_tiles)
      load_rows(stage, pitch, in, args.ld_in, in_walk, next * kGroupRows + warp_in_group * kWarpRows, batch);
    px::cp_async_commit();
    st = st + 1 == STAGES ? 0 : st + 1;
  }
  px::cp_async_wait<0>();
}

// No register cap beyond one block of kMaxGroups warpgroups: capping the 64-wide variants for 768
// threads per SM (80 registers) makes ptxas spill them; uncapped they use 80-96 and run two
// blocks of two warpgroups per SM.
template <typename T, int WIDTH, int STAGES, Epilogue HIDDEN, Epilogue OUT>
__global__ void __launch_bounds__(kMaxGroups* kGroupThreads, 1)
    inference_kernel(KernelShape s, ForwardArgs args, int pitch, int64_t n_tiles) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  inference_body<T, WIDTH, STAGES, HIDDEN, OUT>(s, args, pitch, n_tiles);
#else
  __trap();  // built for sm_90a only; wgmma_inference.cu launches it on compute capability 9.0 only
#endif
}

}  // namespace tinyfuse::cuda::fused::wgmma
