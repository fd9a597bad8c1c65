// OneBlob's features made in a warp's input stage (the Hopper inference kernel behind OneBlob,
// FusedKernel::WgmmaOneBlob): the warp reads its 16 rows' positions (8 bytes a row for W2's two
// inputs) instead of the 256 bytes of features OneBlob's own kernel would write and the network
// read back. The features are those of the encoding's kernel (encodings/oneblob.cu) bit for bit:
// the same boundaries and expressions, zeros where both give exact zeros, and encode_chunk for
// positions outside [0, 1] or NaN; rounded to FP16 as the encoding rounds its output.
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

#include "core/encodings/oneblob_math.h"
#include "cuda/fused/oneblob_input.h"
#include "cuda/primitives/cp_async.cuh"
#include "cuda/primitives/mma_sync.cuh"

namespace tinyfuse::cuda::fused::wgmma {

namespace px = tinyfuse::cuda::ptx;

// The positions a lane encodes: of a warp's 16 rows x dims positions (at most 64), position
// i = lane + 32 q is row i / dims, input i % dims. Worked out once per kernel.
struct OneBlobLane {
  int count = 0;          // 0, 1 or 2 positions
  int row[2] = {0, 0};    // row within the warp's 16
  int at[2] = {0, 0};     // offset from the warp's first row in the positions: row * ldx + input
  uint32_t to[2] = {0, 0};  // byte offset of its features in the stage: row * pitch + input * n_bins * 2
};

__device__ __forceinline__ OneBlobLane oneblob_lane(const OneBlobInput& ob, int lane, int pitch) {
  OneBlobLane l;
  const int positions = 16 * static_cast<int>(ob.dims);
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int i = lane + 32 * q;
    if (i >= positions) break;
    const int r = i / static_cast<int>(ob.dims), d = i % static_cast<int>(ob.dims);
    l.row[q] = r;
    l.at[q] = r * static_cast<int>(ob.ldx) + d;  // the host keeps 16 row strides in an int
    l.to[q] = static_cast<uint32_t>(r * pitch) + static_cast<uint32_t>(d) * ob.n_bins * 2u;
    l.count = q + 1;
  }
  return l;
}

// The lane's positions of the warp's rows from `row0` (read once: streaming loads); rows past the
// batch get 0 (their features are made and never stored).
__device__ __forceinline__ void oneblob_positions(float (&x)[2], const OneBlobInput& ob, const OneBlobLane& l,
                                                  int64_t row0, int64_t batch) {
  const float* base = ob.x + row0 * ob.ldx;
#pragma unroll
  for (int q = 0; q < 2; ++q)
    if (q < l.count) x[q] = row0 + l.row[q] < batch ? __ldcs(base + l.at[q]) : 0.0f;
}

// Part `part` of the lane's positions' features into the stage at `stage`, parts in order 0, 1, 2
// (the kernel spreads them over the hidden layers' products). In [0, 1] only two windows of
// seven bins can differ from 0 (oneblob.cu's encode_chunks_together says why): part 0 zeroes the
// bins, parts 1 and 2 evaluate window 0 (the kernel at x) and window 1 (its copy nearer the
// domain), eight boundaries each (oneblob_window_cdf), storing the features inside [0, n_bins).
// Elsewhere (outside [0, 1], NaN) part 0 writes every chunk as encode_chunk computes it.
__device__ __forceinline__ void oneblob_part(uint32_t stage, const float (&x)[2], const OneBlobInput& ob,
                                             const OneBlobLane& l, int part) {
  const int n_bins = static_cast<int>(ob.n_bins);
  const float n = static_cast<float>(n_bins);
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    if (q >= l.count) break;
    const uint32_t at = stage + l.to[q];
    const float v = x[q];
    const bool inside = v >= 0.0f && v <= 1.0f;
    if (part == 0) {
      if (inside) {
        for (int c = 0; c < n_bins / 8; ++c) px::st_shared_16(at + 16u * c, make_uint4(0, 0, 0, 0));
      } else {
        for (int c = 0; c < n_bins / 8; ++c) {
          float f[8];
          oneblob_encode_chunk<8>(ob.n_bins, v, static_cast<uint32_t>(8 * c), f);
          px::st_shared_16(at + 16u * c, make_uint4(px::pack2<__half>(f[0], f[1]), px::pack2<__half>(f[2], f[3]),
                                                    px::pack2<__half>(f[4], f[5]), px::pack2<__half>(f[6], f[7])));
        }
      }
    } else if (inside) {
      const int copy = part == 1 ? 0 : (v < 0.5f ? 1 : -1);
      const float centre = (part == 1 ? v : (v < 0.5f ? v + 1.0f : v - 1.0f)) * n;
      const int first = static_cast<int>(floorf(centre)) - 3;
      float left = oneblob_window_cdf(first, v, n, ob.inv_bins, copy);
#pragma unroll
      for (int i = 0; i < 7; ++i) {
        const int k = first + i;
        const float right = oneblob_window_cdf(k + 1, v, n, ob.inv_bins, copy);
        if (k >= 0 && k < n_bins) {
          const __half h = __float2half_rn(right - left);
          px::st_shared_2(at + 2u * static_cast<uint32_t>(k), *reinterpret_cast<const unsigned short*>(&h));
        }
        left = right;
      }
    }
  }
}
constexpr int kOneBlobParts = 3;

}  // namespace tinyfuse::cuda::fused::wgmma
