// The Width64FusedMLP kernel on AMD GPUs (matrix-core builtins, primitives/amd_matrix_ops.cuh): y = W2 relu(W1 relu(W0 x + b0) + b1) + b2
// for FP16 rows of 64. Included by width64_fused_mlp.cu in HIP builds, in place of
// width64_kernel.cuh (PTX).
//
// The CUDA kernel's structure: a persistent grid; each wave owns tiles of kRowsPerTile(MT) =
// 16 MT consecutive rows, tile = wave's global index + i * (all waves); the parameters (FP16
// weights, FP32 biases) are loaded once per block into LDS; rows past the batch are zero-filled
// on load and never stored. What differs:
//  - an AMD accumulator's layout is not the next product's A layout, so the activations go
//    through the wave's LDS rows between layers (the CUDA kernel keeps them in registers: its
//    m16n8k16 accumulators are the next layer's A fragments). Each layer computes all 64 output
//    columns of the wave's rows from those rows, then its epilogue writes them back over them
//    from the accumulator registers (wmma_layers_hip.cuh);
//  - the bias is added to the FP32 accumulator in the epilogue, after the products (CUDA starts
//    the accumulators at it): the same operations, another FP32 summation order;
//  - plain loads into LDS, no cp.async double buffering of the next tile (the first AMD
//    version; measuring comes first);
//  - LDS rows padded by 8 elements (as FullyFusedMLP) instead of the XOR swizzle ldmatrix needs.
// Every row goes through the same instructions whatever its tile, so a row's output depends only
// on its input and the parameters (any batch, any launch).
#pragma once

#include <cstdint>

#include "cuda/fused/general/wmma_layers_hip.cuh"

namespace tinyfuse::cuda::width64 {

using fused::FragAcc;
using fused::kFrag;
using fused::kMaxWarpSize;
using fused::kWarpSize;

constexpr int kWidth = 64;
constexpr int kLayers = 3;
constexpr int kLayerParams = kWidth * kWidth + kWidth;  // W then b, per docs/PARAMETERS.md
constexpr int kParams = kLayers * kLayerParams;         // 12,480
constexpr int kWarpsPerBlock = 4;
constexpr int kLd = kWidth + 8;  // LDS row stride (elements) of weights and activations
constexpr int kNB = kWidth / kFrag;
constexpr size_t kWeightBytes = static_cast<size_t>(kLayers) * kWidth * kLd * 2;  // 27,648
constexpr size_t kBiasBytes = kLayers * kWidth * 4;                               // FP32

template <int MT>
constexpr int kRowsPerTile = 16 * MT;
template <int MT>
constexpr size_t kWaveBytes = fused::wave_lds_bytes(kRowsPerTile<MT>, kLd, 2);
template <int MT>
constexpr size_t kSharedBytes = kWeightBytes + kBiasBytes + kWarpsPerBlock * kWaveBytes<MT>;
static_assert(kSharedBytes<2> <= 64 * 1024, "fits the 64 KiB of LDS a workgroup has on current AMD GPUs");

// Weights (row-major out x in, rows padded to kLd) and FP32 biases of all layers into LDS, by
// the whole block; element-wise, so any parameter alignment.
__device__ __forceinline__ void load_parameters(const __half* params, __half* w_lds, float* b_lds) {
  for (int j = threadIdx.x; j < kLayers * kWidth * kWidth; j += blockDim.x) {
    const int layer = j / (kWidth * kWidth), r = (j / kWidth) % kWidth, c = j % kWidth;
    w_lds[(layer * kWidth + r) * kLd + c] = params[layer * kLayerParams + r * kWidth + c];
  }
  for (int j = threadIdx.x; j < kLayers * kWidth; j += blockDim.x)
    b_lds[j] = __half2float(params[(j / kWidth) * kLayerParams + kWidth * kWidth + j % kWidth]);
}

// One layer on the wave's 16 MT rows in LDS: rows = act(rows W^T + b), rounded to FP16, in place;
// the last layer (out != nullptr) writes its rows inside the batch to `out` instead.
template <int MT, bool Relu>
__device__ __forceinline__ void layer(__half* rows, const __half* w, const float* bias, __half* out, int64_t ld_out,
                                      int64_t row0, int64_t batch) {
  FragAcc acc[MT][kNB];
  fused::zero(acc);
  fused::product<__half, MT, kNB>(acc, rows, kLd, w, kLd, kWidth);
  fused::wave_sync();  // every lane's A loads are done before the rows are overwritten
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < kNB; ++n)
      fused::for_each_element(acc[m][n], [&](int r, int c, float v) {
        const int rr = m * kFrag + r, col = n * kFrag + c;
        const float z = __half2float(__float2half_rn(v + bias[col]));
        // ReLU after rounding equals ReLU before (rounding keeps the sign); NaN becomes 0 as on CPU.
        const __half y = __float2half_rn(Relu ? (z > 0.0f ? z : 0.0f) : z);
        if (out) {
          const int64_t row = row0 + rr;
          if (row < batch) out[row * ld_out + col] = y;
        } else {
          rows[rr * kLd + col] = y;
        }
      });
  fused::wave_sync();  // the rows are complete before the next layer reads them
}

template <int MT, bool VecIO>
__global__ void __launch_bounds__(kWarpsPerBlock* kMaxWarpSize)
    width64_fused_kernel(const __half* __restrict__ params, const __half* __restrict__ in, int64_t ld_in,
                         __half* __restrict__ out, int64_t ld_out, int64_t batch) {
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw);
  __half* w_lds = reinterpret_cast<__half*>(smem);
  float* b_lds = reinterpret_cast<float*>(smem + kWeightBytes);
  const int warp = fused::wave_index(), lane = fused::wave_lane();
  unsigned char* wave_lds = smem + kWeightBytes + kBiasBytes + warp * kWaveBytes<MT>;
  __half* rows = reinterpret_cast<__half*>(wave_lds);

  const int64_t rows_per_tile = kRowsPerTile<MT>;
  const int64_t n_tiles = (batch + rows_per_tile - 1) / rows_per_tile;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;

  load_parameters(params, w_lds, b_lds);
  __syncthreads();

  for (int64_t tile = first; tile < n_tiles; tile += step) {
    const int64_t row0 = tile * rows_per_tile;
    if constexpr (VecIO)
      fused::load_rows_16(rows, kLd, in, ld_in, row0, kRowsPerTile<MT>, kWidth, batch, lane);
    else
      fused::load_rows(rows, kLd, in, ld_in, row0, kRowsPerTile<MT>, kWidth, batch, lane);
    fused::wave_sync();
    layer<MT, true>(rows, w_lds, b_lds, nullptr, 0, row0, batch);
    layer<MT, true>(rows, w_lds + kWidth * kLd, b_lds + kWidth, nullptr, 0, row0, batch);
    // The last layer ends with a wave_sync: its A loads are done before the next tile's rows arrive.
    layer<MT, false>(rows, w_lds + 2 * kWidth * kLd, b_lds + 2 * kWidth, out, ld_out, row0, batch);
  }
}

}  // namespace tinyfuse::cuda::width64
