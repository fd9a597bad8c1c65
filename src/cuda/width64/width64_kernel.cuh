// The Width64FusedMLP kernel: y = W2 relu(W1 relu(W0 x + b0) + b1) + b2 for FP16 rows of 64.
//
// Memory-bound by design (256 bytes in and out per sample against 24,576 FLOP), so it streams:
//  - a persistent grid (blocks resident on every SM, launch.h sizes it); each warp owns tiles of
//    kRowsPerTile(MT) = 16 MT consecutive rows, tile = warp's global index + i * (all warps);
//  - the parameters (3 x 64 x 64 weights, FP16, and 3 x 64 biases, kept in FP32) are loaded once
//    per block into shared memory;
//  - a tile's rows are copied global -> shared with 16-byte cp.async into one of two per-warp
//    stage buffers; the next tile's copy is in flight while the current one is computed;
//  - the three layers run on tensor cores (mma.sync m16n8k16, FP16 operands, FP32 accumulation),
//    samples as the M dimension: the FP32 accumulator fragment of a layer's 16 x 16 output block
//    has exactly the register layout of the next layer's A fragment, so activations never leave
//    registers. Accumulators start at the bias (bias added in FP32 before ReLU); ReLU is applied
//    after rounding to FP16 (equal to before: rounding keeps the sign);
//  - the output fragments are rounded to FP16, written into the tile's (now free) stage buffer
//    and stored with 16-byte streaming stores, a warp writing 512 contiguous bytes per store.
// Rows past the batch are zero-filled on load and never stored: any batch, no out-of-bounds
// access. Every row goes through the same instructions in the same order whatever its tile, so
// a row's output depends only on its input and the parameters (bitwise, any batch, any launch).
//
// Shared layout. A 64-wide FP16 row is 128 bytes = 8 chunks of 16 bytes; chunk c of row r is
// stored at chunk position c ^ (r % 8) ("XOR swizzle"), so the 8 row addresses of every
// ldmatrix / stmatrix phase and every 16-byte row copy fall in distinct banks.
#pragma once

#include <cstdint>

#include "cuda/primitives/cp_async.cuh"
#include "cuda/primitives/ldmatrix.cuh"
#include "cuda/primitives/mma_sync.cuh"

namespace tinyfuse::cuda::width64 {

using namespace tinyfuse::cuda::ptx;  // the PTX wrappers this kernel is built from

constexpr int kWidth = 64;
constexpr int kLayers = 3;
constexpr int kRowBytes = kWidth * 2;                        // one FP16 row
constexpr int kChunks = kRowBytes / 16;                      // 16-byte chunks per row
constexpr int kLayerParams = kWidth * kWidth + kWidth;       // W then b, per docs/PARAMETERS.md
constexpr int kParams = kLayers * kLayerParams;              // 12,480
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * 32;
constexpr int kStages = 2;                                   // current tile + the one in flight
constexpr int kMinBlocksPerSm = 3;                      // caps registers at 168 per thread
constexpr int kWeightBytes = kLayers * kWidth * kRowBytes;   // 24,576
constexpr int kBiasBytes = kLayers * kWidth * 4;             // FP32

template <int MT>
constexpr int kRowsPerTile = 16 * MT;
template <int MT>
constexpr int kStageBytes = kRowsPerTile<MT> * kRowBytes;
template <int MT>
constexpr int kSharedBytes = kWeightBytes + kBiasBytes + kWarpsPerBlock * kStages * kStageBytes<MT>;

// Byte offset of chunk `c` of row `r` in a swizzled 128-byte-row matrix.
__device__ __forceinline__ uint32_t swizzled(int r, int c) {
  return static_cast<uint32_t>(r * kRowBytes + ((c ^ (r & 7)) << 4));
}

// The weights (swizzled FP16 rows, out x in as in the parameter buffer) and FP32 biases of all
// layers into shared memory, by the whole block. The weights go by cp.async when the parameter
// buffer is 16-byte aligned (every W starts at a multiple of 16 bytes then), else element-wise.
__device__ __forceinline__ void load_parameters(const __half* params, unsigned char* w_smem, float* b_smem) {
  const bool aligned = (reinterpret_cast<uintptr_t>(params) & 15) == 0;
  for (int j = threadIdx.x; j < kLayers * kWidth * kChunks; j += kThreads) {
    const int layer = j / (kWidth * kChunks), r = (j / kChunks) % kWidth, c = j % kChunks;
    const __half* src = params + layer * kLayerParams + r * kWidth + c * 8;
    const uint32_t dst = shared_address(w_smem + layer * kWidth * kRowBytes) + swizzled(r, c);
    if (aligned) {
      cp_async_16(dst, src, 16);
    } else {
      const unsigned short* s = reinterpret_cast<const unsigned short*>(src);
      uint4 v;
      v.x = s[0] | (static_cast<uint32_t>(s[1]) << 16);
      v.y = s[2] | (static_cast<uint32_t>(s[3]) << 16);
      v.z = s[4] | (static_cast<uint32_t>(s[5]) << 16);
      v.w = s[6] | (static_cast<uint32_t>(s[7]) << 16);
      st_shared_16(dst, v);
    }
  }
  for (int j = threadIdx.x; j < kLayers * kWidth; j += kThreads)
    b_smem[j] = __half2float(params[(j / kWidth) * kLayerParams + kWidth * kWidth + j % kWidth]);
}

// Rows [row0, row0 + 16 MT) of the input into a stage buffer (swizzled); rows past the batch
// become zeros. VecIO: 16-byte cp.async (input 16-byte aligned, row stride a multiple of 8);
// otherwise element-wise loads, finished when this returns.
template <int MT, bool VecIO>
__device__ __forceinline__ void load_tile(unsigned char* stage, const __half* in, int64_t ld_in, int64_t row0,
                                          int64_t batch, int lane) {
  const uint32_t base = shared_address(stage);
#pragma unroll
  for (int i = 0; i < kRowsPerTile<MT> * kChunks / 32; ++i) {
    const int j = i * 32 + lane, r = j / kChunks, c = j % kChunks;
    const int64_t row = row0 + r;
    const bool valid = row < batch;
    const __half* src = in + (valid ? row * ld_in + c * 8 : 0);
    if constexpr (VecIO) {
      cp_async_16(base + swizzled(r, c), src, valid ? 16u : 0u);
    } else {
      uint32_t w[4] = {0, 0, 0, 0};
      if (valid) {
        const unsigned short* s = reinterpret_cast<const unsigned short*>(src);
#pragma unroll
        for (int k = 0; k < 4; ++k) w[k] = s[2 * k] | (static_cast<uint32_t>(s[2 * k + 1]) << 16);
      }
      st_shared_16(base + swizzled(r, c), make_uint4(w[0], w[1], w[2], w[3]));
    }
  }
}

// The stage buffer's rows [row0, row0 + 16 MT) that lie inside the batch to the output.
template <int MT, bool VecIO>
__device__ __forceinline__ void store_tile(const unsigned char* stage, __half* out, int64_t ld_out, int64_t row0,
                                           int64_t batch, int lane) {
  const uint32_t base = shared_address(stage);
#pragma unroll
  for (int i = 0; i < kRowsPerTile<MT> * kChunks / 32; ++i) {
    const int j = i * 32 + lane, r = j / kChunks, c = j % kChunks;
    const int64_t row = row0 + r;
    if (row >= batch) continue;
    const uint4 v = ld_shared_16(base + swizzled(r, c));
    __half* dst = out + row * ld_out + c * 8;
    if constexpr (VecIO) {
      st_global_streaming_16(dst, v);
    } else {
      unsigned short* d = reinterpret_cast<unsigned short*>(dst);
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        d[2 * k] = static_cast<unsigned short>(w[k] & 0xffffu);
        d[2 * k + 1] = static_cast<unsigned short>(w[k] >> 16);
      }
    }
  }
}

// Shared address lane `lane` hands ldmatrix / stmatrix for the 16 x 16 block (rows 16 mt.., k
// columns 16 kt..) of a swizzled row matrix: matrices 0..3 = (rows +0, k +0), (rows +8, k +0),
// (rows +0, k +8), (rows +8, k +8), which is the A-fragment register order of mma m16n8k16.
__device__ __forceinline__ uint32_t a_block_address(uint32_t base, int mt, int kt, int lane) {
  const int r = mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  return base + swizzled(r, 2 * kt + (lane >> 4));
}

// Same for the B fragments of n-tiles 2 np and 2 np + 1 at k-tile kt, read from W (out x in):
// matrices (n-tile 2np, k +0), (2np, k +8), (2np + 1, k +0), (2np + 1, k +8).
__device__ __forceinline__ uint32_t b_pair_address(uint32_t w_base, int np, int kt, int lane) {
  const int q = lane >> 3;
  const int n = (2 * np + (q >> 1)) * 8 + (lane & 7);
  return w_base + swizzled(n, 2 * kt + (q & 1));
}

// One layer on a warp's 16 MT rows: out = act(x W^T + b) as FP16 A fragments, where
// x[mt][kt] / out[mt][kt] hold rows 16 mt.., columns 16 kt.. . The 64 output columns are done in
// two halves of 32 so that only 32 MT FP32 accumulators are live (no spills under the 168-register
// cap of kMinBlocksPerSm).
// Accumulators start at the bias: it is added in FP32, before the activation. An FP32 16 x 8
// accumulator pair (n-tiles 2 j, 2 j + 1) has exactly the register layout of the FP16 A fragment
// of columns 16 j.. : rows g (c0, c1) and g + 8 (c2, c3), columns +0 and +8.
template <int MT, bool Relu>
__device__ __forceinline__ void layer(uint32_t (&out)[MT][4][4], const uint32_t (&x)[MT][4][4], uint32_t w_base,
                                      const float* bias, int lane) {
  const int t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float acc[MT][4][4];  // n-tiles 4 half .. 4 half + 3
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const float2 b = *reinterpret_cast<const float2*>(bias + (4 * half + n) * 8 + 2 * t);  // this lane's columns
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        acc[mt][n][0] = b.x;
        acc[mt][n][1] = b.y;
        acc[mt][n][2] = b.x;
        acc[mt][n][3] = b.y;
      }
    }
#pragma unroll
    for (int kt = 0; kt < 4; ++kt)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        uint32_t b[4];
        ldmatrix_x4(b, b_pair_address(w_base, 2 * half + p, kt, lane));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<__half>(acc[mt][2 * p], x[mt][kt], b[0], b[1]);
          mma_16816<__half>(acc[mt][2 * p + 1], x[mt][kt], b[2], b[3]);
        }
      }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int p = 0; p < 2; ++p)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float(&c)[4] = acc[mt][2 * p + h];
          uint32_t(&o)[4] = out[mt][2 * half + p];
          o[2 * h] = Relu ? pack_half2_relu(c[0], c[1]) : pack2<__half>(c[0], c[1]);
          o[2 * h + 1] = Relu ? pack_half2_relu(c[2], c[3]) : pack2<__half>(c[2], c[3]);
        }
  }
}

// The output fragments into the stage buffer (swizzled rows), where store_tile picks them up.
template <int MT>
__device__ __forceinline__ void fragments_to_stage(uint32_t stage_base, const uint32_t (&o)[MT][4][4], int lane) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kt = 0; kt < 4; ++kt) {
#if __CUDA_ARCH__ >= 900
      stmatrix_x4(a_block_address(stage_base, mt, kt, lane), o[mt][kt]);
#else
      const int g = lane >> 2, t = lane & 3;
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // register q: rows +8 (q odd), columns +8 (q >= 2)
        const int r = mt * 16 + g + (q & 1) * 8;
        st_shared_4(stage_base + swizzled(r, 2 * kt + (q >> 1)) + 4 * t, o[mt][kt][q]);
      }
#endif
    }
}

template <int MT, bool VecIO>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    width64_fused_kernel(const __half* __restrict__ params, const __half* __restrict__ in, int64_t ld_in,
                         __half* __restrict__ out, int64_t ld_out, int64_t batch) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* w_smem = smem;
  float* b_smem = reinterpret_cast<float*>(smem + kWeightBytes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned char* stages = smem + kWeightBytes + kBiasBytes + warp * kStages * kStageBytes<MT>;

  const int64_t rows_per_tile = kRowsPerTile<MT>;
  const int64_t n_tiles = (batch + rows_per_tile - 1) / rows_per_tile;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;

  // Commit groups per thread: parameters, tile 0, tile 1, then one per finished tile.
  load_parameters(params, w_smem, b_smem);
  cp_async_commit();
  for (int s = 0; s < kStages; ++s) {
    const int64_t tile = first + s * step;
    if (tile < n_tiles) load_tile<MT, VecIO>(stages + s * kStageBytes<MT>, in, ld_in, tile * rows_per_tile, batch, lane);
    cp_async_commit();
  }
  cp_async_wait<kStages - 1>();  // the parameters and tile 0 have landed (this thread's copies)
  __syncthreads();               // ... everyone's

  const uint32_t w_base = shared_address(w_smem);
  int s = 0;
  for (int64_t tile = first; tile < n_tiles; tile += step) {
    unsigned char* stage = stages + s * kStageBytes<MT>;
    const uint32_t stage_base = shared_address(stage);
    cp_async_wait<kStages - 1>();
    __syncwarp();

    uint32_t a[MT][4][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kt = 0; kt < 4; ++kt) ldmatrix_x4(a[mt][kt], a_block_address(stage_base, mt, kt, lane));

    uint32_t h[MT][4][4];
    layer<MT, true>(h, a, w_base, b_smem, lane);
    layer<MT, true>(a, h, w_base + kWidth * kRowBytes, b_smem + kWidth, lane);
    layer<MT, false>(h, a, w_base + 2 * kWidth * kRowBytes, b_smem + 2 * kWidth, lane);

    __syncwarp();  // every lane's ldmatrix of this stage is done before it is overwritten
    fragments_to_stage<MT>(stage_base, h, lane);
    __syncwarp();
    store_tile<MT, VecIO>(stage, out, ld_out, tile * rows_per_tile, batch, lane);
    __syncwarp();  // the stage is read out before the next copy into it

    const int64_t next = tile + kStages * step;
    if (next < n_tiles) load_tile<MT, VecIO>(stage, in, ld_in, next * rows_per_tile, batch, lane);
    cp_async_commit();
    s = (s + 1) % kStages;
  }
  cp_async_wait<0>();
#else
  // Built for an architecture without mma.sync m16n8k16 / cp.async: never launched (the host
  // checks the kernel's binary version before using it).
  __trap();
#endif
}

}  // namespace tinyfuse::cuda::width64
