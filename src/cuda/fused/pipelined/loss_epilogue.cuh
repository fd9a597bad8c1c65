// The loss (L2, RelativeL2 or L1) folded into the pipelined training forward
// (pipelined/forward_kernel.cuh): once a warp's output tile sits in its stage buffer, each lane takes 8-column groups of its rows (the ChunkWalk order
// the stores use, so the target loads are coalesced), evaluates the loss terms, writes the scaled
// gradients and leaves each group's sum of values in the stage, from where one lane per row adds
// them in group order and divides once. This is the GPU Loss's per-row mode (losses.cu,
// dense_loss_kernel without a data pdf) operation for operation, so the values and gradients are
// the same bits; what it saves is writing the output and reading it back (2 x 2 B per output
// element) and the loss kernel's launch.
#pragma once

#include <cstdint>

#include "core/loss_math.h"
#include "cuda/common.cuh"
#include "cuda/fused/launch.h"
#include "cuda/primitives/cp_async.cuh"
#include "cuda/primitives/ldmatrix.cuh"
#include "cuda/primitives/mma_sync.cuh"

namespace tinyfuse::cuda::fused {

namespace {

namespace px = tinyfuse::cuda::ptx;

// The losses folded in: L2 (most fields), RelativeL2 (tiny-cuda-nn's image and radiance-cache
// configs) and L1 (signed distance fields); the others run the loss kernel. Each is its own
// instantiation of the epilogue, chosen once per tile (loss_epilogue_of_kind): with the kind a
// run-time switch per element (every built-in loss), the forward measured 375 us at 2^20 rows
// (against 150 + 166 for forward and loss kernel): the switch, inlined per element of the
// unrolled groups, grew the kernel to 19.5 k instructions.
__host__ __device__ constexpr bool is_folded_loss(int kind) {
  return kind == static_cast<int>(LossKind::L2) || kind == static_cast<int>(LossKind::RelativeL2) ||
         kind == static_cast<int>(LossKind::L1);
}

// Eight stage elements (16 bytes) as floats.
template <typename T>
__device__ __forceinline__ void unpack8(uint4 v, float (&out)[8]) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int k = 0; k < 8; ++k) out[k] = to_float(e[k]);
}

// Asks L2 for the target rows [row0, row0 + ROWS) when a tile starts, so that the epilogue's
// loads, a layer-chain later, can find them there. Added with the batched loads below against
// target-load latency; on the H200 the two together changed nothing measurable in the kernel of
// that time (forward 375 -> 369 us at 2^20 rows, whose cost was the run-time loss switch). Kept
// in the measured final kernel (280 us); not measured without them since.
template <int ROWS>
__device__ __forceinline__ void prefetch_target(const ForwardArgs::Loss& L, int64_t row0, int64_t batch, int lane) {
  const int row_bytes = L.dims * 4;
  for (int r = lane; r < ROWS; r += kWarpSize) {
    const int64_t row = row0 + r;
    if (row >= batch) break;
    const uintptr_t begin = reinterpret_cast<uintptr_t>(L.target + row * L.ld_target);
    for (uintptr_t line = begin & ~uintptr_t{127}; line < begin + row_bytes; line += 128)
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(line));
  }
}

// One 8-column group of a row: outputs p, targets t, of which the first `live` columns are the
// target's (ALL: all eight, the common case, without a test per column) -> gradients g (x / n,
// 0 past `live`) and the group's sum of loss values. The gradients divide through the reciprocal
// (core/loss_math.h, the same bits as the division) when the whole group allows it, else one by
// one: the IEEE division per element, with its range checks and slow-path branch, was 30 % of
// the one-kernel training pass's instructions (ncu, H200).
template <LossKind KIND, typename T, bool ALL>
__device__ __forceinline__ float loss_group(const float (&p)[8], const float (&t)[8], int live, const ForwardArgs::Loss& L,
                                            float inv_n, T (&g)[8]) {
  float x[8];
  float group_sum = 0.0f;
  bool safe = true;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    x[k] = 0.0f;
    if (ALL || k < live) {
      const LossTerm<float> term = loss_term(KIND, p[k], t[k], 1.0f, 0.0f);
      // Rounded product, then rounded sum, as the loss kernel adds (there the kind is a run-time
      // switch, so the product and the sum are not contracted); with the kind a constant the
      // compiler would fuse them into one FMA and the row value would differ in the last bit.
      group_sum = __fadd_rn(group_sum, term.value);
      x[k] = __fmul_rn(L.scale, term.gradient);
      safe = safe && divide_by_reciprocal_safe(x[k]);
    }
  }
  if (safe) {
#pragma unroll
    for (int k = 0; k < 8; ++k) g[k] = from_float<T>(ALL || k < live ? divide_by_reciprocal(x[k], L.n, inv_n) : 0.0f);
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) g[k] = from_float<T>(ALL || k < live ? x[k] / L.n : 0.0f);
  }
  return group_sum;
}

// Rows [row0, row0 + ROWS) of the output in the stage (out_width columns, row stride
// stage_stride bytes) through the loss. Walk is pipelined/forward_kernel.cuh's ChunkWalk. A lane's groups go
// kBatch at a time: their target loads are all issued before the first is used. IN_PLACE = false
// (the training forward): the gradients go to L.gradients, each group's value sum into the stage
// where the group was; ends with the stage free (the caller's __syncwarp before the next copy
// into it covers the last reads). IN_PLACE = true (the one-kernel training pass,
// pipelined/train_step_kernel.cuh): the gradients replace the output in the stage (zeros in rows past the
// batch), the group sums go to `sums` (ROWS x 8 floats, shared memory), and the stage then holds
// dL/doutput as the backward would have loaded it.
template <LossKind KIND, typename T, int ROWS, typename Walk, bool IN_PLACE>
__device__ __forceinline__ void loss_epilogue(uint32_t stage, int stage_stride, int out_width, const ForwardArgs::Loss& L,
                                              int64_t row0, int64_t batch, int lane, uint32_t sums = 0) {
  constexpr int kBatch = 4;
  constexpr int kSumStride = 8 * 4;  // bytes per row of `sums`
  T* grads = static_cast<T*>(L.gradients);
  const float inv_n = 1.0f / L.n;  // the loss's n: batch x dims, at least 1
  Walk w(lane, out_width / 8);
  while (w.r < ROWS) {
    int rows[kBatch], cols[kBatch];
    float4 tv[kBatch][2];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      rows[j] = w.r;
      cols[j] = w.c;
      tv[j][0] = tv[j][1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const int64_t row = row0 + w.r;
      if (w.r < ROWS && row < batch && L.vector_target && w.c * 8 + 8 <= L.dims) {
        const float4* src = reinterpret_cast<const float4*>(L.target + row * L.ld_target + w.c * 8);
        tv[j][0] = __ldcs(src);
        tv[j][1] = __ldcs(src + 1);
      }
      w.next();
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int64_t row = row0 + rows[j];
      if (rows[j] >= ROWS || row >= batch) break;  // rows only grow along the walk
      const uint32_t at = stage + rows[j] * stage_stride + cols[j] * 16;
      float p[8], t[8];
      unpack8<T>(px::ld_shared_16(at), p);
      const int d0 = cols[j] * 8;
      if (L.vector_target && d0 + 8 <= L.dims) {
        t[0] = tv[j][0].x, t[1] = tv[j][0].y, t[2] = tv[j][0].z, t[3] = tv[j][0].w;
        t[4] = tv[j][1].x, t[5] = tv[j][1].y, t[6] = tv[j][1].z, t[7] = tv[j][1].w;
      } else {
        const float* trow = L.target + row * L.ld_target;
#pragma unroll
        for (int k = 0; k < 8; ++k) t[k] = d0 + k < L.dims ? trow[d0 + k] : 0.0f;
      }
      alignas(16) T g[8];
      const int live = L.dims - d0;  // columns of the group the target has (the rest: gradient 0)
      const float group_sum =
          live >= 8 ? loss_group<KIND, T, true>(p, t, live, L, inv_n, g) : loss_group<KIND, T, false>(p, t, live, L, inv_n, g);
      if constexpr (IN_PLACE) {
        px::st_shared_16(at, *reinterpret_cast<const uint4*>(g));  // this lane alone read this group
        px::st_shared_4(sums + rows[j] * kSumStride + cols[j] * 4, __float_as_uint(group_sum));
      } else {
        *reinterpret_cast<uint4*>(grads + row * L.ld_grad + d0) = *reinterpret_cast<const uint4*>(g);
        px::st_shared_4(at, __float_as_uint(group_sum));  // this lane alone read this group
      }
    }
  }
  if constexpr (IN_PLACE) {  // rows past the batch: dL/doutput 0, as a zero-filled load gives
    if (batch - row0 < ROWS) {
      const int valid = static_cast<int>(batch - row0);
      for (Walk z(lane, out_width / 8); z.r < ROWS; z.next())
        if (z.r >= valid) px::st_shared_16(stage + z.r * stage_stride + z.c * 16, make_uint4(0u, 0u, 0u, 0u));
    }
  }
  __syncwarp();
  const int groups = out_width / 8;
  for (int r = lane; r < ROWS; r += kWarpSize) {
    const int64_t row = row0 + r;
    if (row >= batch) break;
    float sum = 0.0f;
    for (int c = 0; c < groups; ++c)
      sum += __uint_as_float(IN_PLACE ? px::ld_shared_4(sums + r * kSumStride + c * 4)
                                      : px::ld_shared_4(stage + r * stage_stride + c * 16));
    L.values[row * L.values_rs] = sum / L.n;
  }
}

// loss_epilogue for L.kind (one of is_folded_loss's; the planner checked).
template <typename T, int ROWS, typename Walk, bool IN_PLACE = false>
__device__ __forceinline__ void loss_epilogue_of_kind(uint32_t stage, int stage_stride, int out_width,
                                                      const ForwardArgs::Loss& L, int64_t row0, int64_t batch, int lane,
                                                      uint32_t sums = 0) {
  if (L.kind == static_cast<int>(LossKind::RelativeL2))
    loss_epilogue<LossKind::RelativeL2, T, ROWS, Walk, IN_PLACE>(stage, stage_stride, out_width, L, row0, batch, lane,
                                                                  sums);
  else if (L.kind == static_cast<int>(LossKind::L1))
    loss_epilogue<LossKind::L1, T, ROWS, Walk, IN_PLACE>(stage, stage_stride, out_width, L, row0, batch, lane, sums);
  else
    loss_epilogue<LossKind::L2, T, ROWS, Walk, IN_PLACE>(stage, stage_stride, out_width, L, row0, batch, lane, sums);
}

}  // namespace

}  // namespace tinyfuse::cuda::fused
