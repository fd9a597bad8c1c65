// FullyFusedMLP's Hopper inference kernel (sm_90a; hopper/inference.cu launches it): the streaming
// kernel's plan (pipelined/forward_kernel.cuh) with every layer on warpgroup tensor-core products
// (wgmma.mma_async, primitives/wgmma.cuh) instead of per-warp mma.sync. Measured against it on an H200
// (benchmarks/experiments/wgmma_probe.cu, docs/PERFORMANCE.md): 1.3x at 64 wide, 2.7x at 128 wide.
//  - a persistent grid of blocks of 1 .. max_groups(WIDTH) warpgroups; a warpgroup owns tiles of 64
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
//    warps never wait for each other except inside wgmma (warpgroup-wide by definition). Where
//    two stages leave room for fewer warpgroups (deep 128-wide networks), one stage: the next
//    tile's rows are asked for once layer 0 has read this one's, and the output goes through a
//    stage of its own, as wide as the output. Behind OneBlob (ONEBLOB) no rows are copied: each
//    warp makes its rows' features in its one stage from their positions (oneblob_stage.cuh):
//    the next tile's positions are asked for before layer 0 and its features made in parts
//    while hidden layers 1-3's products are in flight (W2 at 2^21 on an H100: 571 -> 556 us).
// A layer is one batch of wgmma then a wait; the block's other warpgroups keep the tensor cores
// busy meanwhile. Same rounding points as every fused kernel (epilogue.cuh), and the tensor
// cores sum a 16-deep product as they do for mma.sync: the results are the mma.sync kernels'
// bit for bit (measured on the H200 and required by test_fused_wgmma.cpp).
// Small batches wait for the instructions before and around the first tile (a block has one or
// two tiles per warpgroup at 2^14 - 2^16 rows), so the host works out every launch constant
// (Plan), copies walk by precomputed steps (without bounds for every tile but the batch's last),
// and the square ReLU network gets its own instance with its widths built in (SQUARE).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/fused/epilogue.cuh"
#include "cuda/fused/hopper/oneblob_stage.cuh"
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/launch_params.h"
#include "cuda/primitives/wgmma.cuh"
#include "cuda/primitives/cp_async.cuh"
#include "cuda/primitives/ldmatrix.cuh"
#include "cuda/primitives/mma_sync.cuh"

namespace tinyfuse::cuda::fused::wgmma {

namespace px = tinyfuse::cuda::ptx;

constexpr int kGroupThreads = 128;  // a warpgroup
constexpr int kGroupRows = 64;      // rows of a warpgroup tile (the m of m64nNk16)
constexpr int kWarpRows = 16;
constexpr int kMaxGroups = 3;  // warpgroups per block
// Per width: 64 wide runs blocks of at most two warpgroups, two blocks per SM (register budget 128
// per thread, launch bounds below); 128 wide one block of up to three.
__host__ __device__ constexpr int max_groups(int width) { return width == 64 ? 2 : kMaxGroups; }
__host__ __device__ constexpr int min_blocks_per_sm(int width) { return width == 64 ? 2 : 1; }
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

// The constants of a launch over `batch` rows with these strides (host side).
inline Plan make_plan(int width, const FusedShape& shape, int64_t ld_in, int64_t ld_out, int64_t batch, int elem_bytes) {
  const KernelShape ks = kernel_shape(shape, true);
  Plan p;
  p.pitch = ((shape.in_width > shape.out_width ? shape.in_width : shape.out_width) + kSmemPad) * elem_bytes;
  p.weights_bytes = all_layers_bytes(width, ks);
  p.first_layer_bytes = layer_bytes(layer_out(width, ks, 0), shape.in_width);
  p.ld_in = static_cast<int>(ld_in);
  p.ld_out = static_cast<int>(ld_out);
  p.in_chunks = shape.in_width / 8;
  p.out_chunks = shape.out_width / 8;
  p.in_rows_per_step = kWarpSize / p.in_chunks;
  p.out_rows_per_step = kWarpSize / p.out_chunks;
  p.in_per_chunk = 1.0f / static_cast<float>(p.in_chunks);
  p.out_per_chunk = 1.0f / static_cast<float>(p.out_chunks);
  p.n_tiles = (batch + kGroupRows - 1) / kGroupRows;
  p.full_tiles = batch / kGroupRows;
  return p;
}
// Bytes per row of a warp's output stage: with one input stage a warp (own_out_stage below) the
// output has a stage of its own, as wide as the output; with two, it goes through the input's.
__host__ __device__ constexpr int out_stage_pitch(int out_width, int elem_bytes) { return (out_width + kSmemPad) * elem_bytes; }
__host__ __device__ constexpr bool own_out_stage(int stages) { return stages == 1; }
// Shared bytes of a warp's stages, each input stage `stage_bytes` (kWarpRows rows): the host sizes
// the launch by it, the kernel lays the stages out by it.
__host__ __device__ constexpr int warp_stage_bytes(int stages, int stage_bytes, int out_pitch) {
  return stages * stage_bytes + (own_out_stage(stages) ? kWarpRows * out_pitch : 0);
}

// Shared bytes of a launch: the weights (+ 1024 alignment slack) and each warp's stages.
inline size_t launch_smem_bytes(const Plan& p, int groups, int stages, int out_width, int elem_bytes) {
  const int warp_bytes = warp_stage_bytes(stages, kWarpRows * p.pitch, out_stage_pitch(out_width, elem_bytes));
  return 1024 + static_cast<size_t>(p.weights_bytes) + static_cast<size_t>(groups) * 4 * static_cast<size_t>(warp_bytes);
}

// One layer's weights into the swizzled layout at `dst`, by the whole block, any input width:
// 16-byte cp.async when `aligned`, else element-wise; columns past the input width inside the
// last 64-column block are zeros.
__device__ __forceinline__ void stage_layer_any(uint32_t dst, const uint16_t* src, int n_out, int n_in, bool aligned) {
  const int chunks = n_in / 8, padded = (n_in + kBlockCols - 1) / kBlockCols * (kBlockCols / 8);
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
}

// `rows` weight rows WIDTH inputs wide (16-byte aligned) into the swizzled layout at `dst`: such
// layers have no zero columns and as many shared bytes as global ones, and chunk j of the source
// (row j / (WIDTH / 8), chunk j % (WIDTH / 8)) has one place; only shifts and masks find it.
// At 64 wide the layers' rows follow each other in both layouts and every layer has a multiple
// of 8 rows, so one call stages them all (`rows` = their sum); at 128 wide a layer's two
// column blocks are `rows` rows apart, one call per layer.
template <int WIDTH>
__device__ __forceinline__ void stage_full_rows(uint32_t dst, const uint16_t* src, int rows) {
  constexpr unsigned kRowChunks = WIDTH / 8;
  const unsigned n_chunks = static_cast<unsigned>(rows) * kRowChunks, stride = blockDim.x;
  const char* from = reinterpret_cast<const char*>(src) + threadIdx.x * 16u;
  for (unsigned j = threadIdx.x; j < n_chunks; j += stride, from += stride * 16u) {
    const unsigned n = j / kRowChunks, c = j % kRowChunks;
    px::cp_async_16(dst + (c / 8) * rows * 128u + n * 128u + (((c % 8) ^ (n % 8)) << 4), from, 16u);
  }
}

// Every layer's weights into the swizzled layout from `w_base` on, by the whole block; `aligned`:
// the weights start on 16 bytes. The caller waits, fences the async proxy and syncs the block.
template <int WIDTH>
__device__ __forceinline__ void stage_weights(uint32_t w_base, const uint16_t* weights, const KernelShape& s,
                                              int in_width, int out_width, bool aligned, const Plan& p) {
  int l = 0;
  uint32_t dst = w_base;
  const uint16_t* src = weights;
  if (!aligned || in_width != WIDTH) {
    stage_layer_any(dst, src, layer_out(WIDTH, s, 0), in_width, aligned);
    dst += p.first_layer_bytes;
    src += WIDTH * in_width;
    l = 1;
  }
  if constexpr (WIDTH == kBlockCols) {
    if (aligned) {
      stage_full_rows<WIDTH>(dst, src, (s.n_hidden - l) * WIDTH + out_width);
      return;
    }
  }
  for (; l <= s.n_hidden; ++l) {
    const int n_out = l == s.n_hidden ? out_width : WIDTH;
    if (aligned)
      stage_full_rows<WIDTH>(dst, src, n_out);
    else
      stage_layer_any(dst, src, n_out, WIDTH, false);
    dst += layer_bytes(n_out, WIDTH);
    src += n_out * WIDTH;
  }
}

// ldmatrix / stmatrix address of lane `lane` for the 16 x 16 block at column col0 of a warp's
// 16-row stage (row stride `pitch` bytes): matrices (rows +0, cols +0), (+8, +0), (+0, +8),
// (+8, +8), the A-fragment register order.
__device__ __forceinline__ uint32_t block_row(uint32_t base, int pitch, int col0, int lane) {
  return base + ((lane & 7) + ((lane >> 3) & 1) * 8) * pitch + (col0 + (lane >> 4) * 8) * 2;
}

// How a lane walks the 16-byte chunks of a warp's 16 rows (chunk i = lane + 32 j is row
// i / chunks, chunk i % chunks) in global memory (row stride `ld` elements) and in its stage (row
// stride `pitch` bytes): where it starts and how far each step goes, worked out once per kernel.
// When the chunks per row divide 32 (16, 32, 64, 128 or 256 columns) every step is the same
// number of whole rows (`regular`); otherwise a step can wrap to the next row.
struct RowWalk {
  int r0, c0, dr, dc, chunks;
  int g0, g_step, g_wrap;  // elements: start, step, extra on a wrap
  int s0, s_step, s_wrap;  // stage bytes: the same
  bool regular;
  // first_row: lane / n_chunks (lane_row below); rows_per_step: kWarpSize / n_chunks.
  __device__ __forceinline__ RowWalk(int lane, int first_row, int n_chunks, int rows_per_step, int ld, int pitch) {
    chunks = n_chunks;
    r0 = first_row;
    c0 = lane - r0 * n_chunks;
    dr = rows_per_step;
    dc = kWarpSize - dr * n_chunks;
    regular = dc == 0;
    g0 = r0 * ld + c0 * 8;
    s0 = r0 * pitch + c0 * 16;
    g_step = dr * ld + dc * 8;
    s_step = dr * pitch + dc * 16;
    g_wrap = ld - n_chunks * 8;
    s_wrap = pitch - n_chunks * 16;
  }
};

// lane / chunks without a division: by the reciprocal, exact as lane < 32 and chunks <= 32.
__device__ __forceinline__ int lane_row(int lane, float per_chunk) { return static_cast<int>((lane + 0.5f) * per_chunk); }

// Calls f(r, g, sa) for each of this lane's chunks in rows r < end: g its global address from
// `rows0` (the warp's first row), sa its stage address.
template <typename P, typename F>
__device__ __forceinline__ void walk_rows(uint32_t stage, P* rows0, const RowWalk& w, int end, F&& f) {
  P* g = rows0 + w.g0;
  uint32_t sa = stage + w.s0;
  if (w.regular) {
    for (int r = w.r0; r < end; r += w.dr, g += w.g_step, sa += w.s_step) f(r, g, sa);
    return;
  }
  for (int r = w.r0, c = w.c0; r < end;) {
    f(r, g, sa);
    r += w.dr, c += w.dc, g += w.g_step, sa += w.s_step;
    if (c >= w.chunks) c -= w.chunks, ++r, g += w.g_wrap, sa += w.s_wrap;
  }
}

// A warp's 16 rows starting at `in` into its stage; rows from `rows` on are past the batch:
// zero-filled (their copies read nothing; `any` is a valid address).
__device__ __forceinline__ void load_rows(uint32_t stage, const uint16_t* in, const RowWalk& w, int rows,
                                          const uint16_t* any) {
  walk_rows(stage, in, w, kWarpRows, [&](int r, const uint16_t* g, uint32_t sa) {
    const bool valid = r < rows;
    px::cp_async_16(sa, valid ? g : any, valid ? 16u : 0u);
  });
}
// The first `rows` of a warp's 16 stage rows out to `out`.
__device__ __forceinline__ void store_rows(uint32_t stage, uint16_t* out, const RowWalk& w, int rows) {
  walk_rows(stage, out, w, rows, [](int, uint16_t* g, uint32_t sa) { px::st_global_streaming_16(g, px::ld_shared_16(sa)); });
}

// A warp's 16 rows when all are inside the batch: no bounds and, in the square kernel (SQUARE:
// the walk is regular with kWarpSize / chunks rows per step, a constant), a fixed number of steps.
template <bool SQUARE, int CHUNKS>
__device__ __forceinline__ void load_full_rows(uint32_t stage, const uint16_t* rows0, const RowWalk& w) {
  if constexpr (SQUARE) {
    constexpr int kSteps = kWarpRows / (kWarpSize / CHUNKS);
    const uint16_t* g = rows0 + w.g0;
    const uint32_t sa = stage + w.s0;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) px::cp_async_16(sa + k * w.s_step, g + k * w.g_step, 16u);
  } else {
    walk_rows(stage, rows0, w, kWarpRows, [](int, const uint16_t* g, uint32_t sa) { px::cp_async_16(sa, g, 16u); });
  }
}
template <bool SQUARE, int CHUNKS>
__device__ __forceinline__ void store_full_rows(uint32_t stage, uint16_t* rows0, const RowWalk& w) {
  if constexpr (SQUARE) {
    constexpr int kSteps = kWarpRows / (kWarpSize / CHUNKS);
    uint16_t* g = rows0 + w.g0;
    const uint32_t sa = stage + w.s0;
    uint4 v[kSteps];  // every read first, so the stores do not wait on them one by one
#pragma unroll
    for (int k = 0; k < kSteps; ++k) v[k] = px::ld_shared_16(sa + k * w.s_step);
#pragma unroll
    for (int k = 0; k < kSteps; ++k) px::st_global_streaming_16(g + k * w.g_step, v[k]);
  } else {
    store_rows(stage, rows0, w, kWarpRows);
  }
}

// Rows of the warp's tile at row0 that are inside the batch (0 .. 16).
__device__ __forceinline__ int rows_inside(int64_t row0, int64_t batch) {
  const int64_t left = batch - row0;
  return left <= 0 ? 0 : left >= kWarpRows ? kWarpRows : static_cast<int>(left);
}

// Accumulators of m64nNk16 (N / 2 per thread) -> finished A fragments (N / 16 k-steps); d is
// left finished (the Generic epilogue works in place).
template <typename T, int N, Epilogue E>
__device__ __forceinline__ void to_fragments(uint32_t (&a)[N / 16][4], float (&d)[N / 2], Activation act) {
  finish_block<T, E>(d, act);
#pragma unroll
  for (int j = 0; j < N / 16; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) a[j][i] = finish_pair<T, finished(E)>(d[8 * j + 2 * i], d[8 * j + 2 * i + 1], act);
}

// d = x W^T over K = 16 KS inputs, x as A fragments, W (n_out rows) at `w`, output rows n0..n0 + N.
// `meanwhile` runs while the tensor cores work (it must not touch d or x).
struct Nothing {
  __device__ void operator()() const {}
};
template <typename T, int N, int KS, typename F = Nothing>
__device__ __forceinline__ void product(float (&d)[N / 2], const uint32_t (&x)[KS][4], uint32_t w, int n_out, int n0,
                                        F&& meanwhile = F{}) {
  fence();
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) wgmma_rs<T, N>(d, x[ks], b_step(w, n_out, n0, ks), ks > 0 ? 1 : 0);
  commit();
  meanwhile();
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

// The first layer's accumulators `d` finished into `a`, then hidden layers 1 .. n_hidden - 1
// (WIDTH -> WIDTH, weights from `w` on): `a` ends as the last hidden layer's output, and the
// result is where the output layer's weights start. meanwhile(l) runs while layer l's products
// are in flight.
struct NothingAt {
  __device__ void operator()(int) const {}
};
template <typename T, int WIDTH, Epilogue HIDDEN, typename F = NothingAt>
__device__ __forceinline__ uint32_t hidden_layers(uint32_t (&a)[WIDTH / 16][4], float (&d)[WIDTH / 2], uint32_t w,
                                                  const KernelShape& s, F&& meanwhile = F{}) {
  to_fragments<T, WIDTH, HIDDEN>(a, d, s.act);
  for (int l = 1; l < s.n_hidden; ++l, w += layer_bytes(WIDTH, WIDTH)) {
    product<T, WIDTH, WIDTH / 16>(d, a, w, WIDTH, 0, [&] { meanwhile(l); });
    to_fragments<T, WIDTH, HIDDEN>(a, d, s.act);
  }
  return w;
}

// Milestones of a warp's work, for the timeline probe (benchmarks/probes/wgmma_timeline.cu), a
// developer build that defines TINYFUSE_KERNEL_TIMELINE and its own tf_timeline_mark(k) before
// including this header. Every other build compiles the marks to nothing.
#if defined(TINYFUSE_KERNEL_TIMELINE)
#define TF_TIMELINE_MARK(k) tf_timeline_mark(k)
#else
#define TF_TIMELINE_MARK(k) static_cast<void>(0)
#endif
enum Mark : int {
  kMarkEntry = 0,      // the warp starts
  kMarkIssued = 1,     // the first tiles' copies and the weights' are queued
  kMarkStaged = 2,     // the weights and the first tile have landed, block synced
  kMarkTile = 3,       // + 3 n: tile n's rows have landed; + 3 n + 1: its output is in the stage;
  kMarkTiles = 3,      //   + 3 n + 2: its stores are issued (tiles n < kMarkTiles)
  kMarkEnd = 3 + 3 * kMarkTiles,  // the warp's copies have all landed
  kMarkCount = kMarkEnd + 1
};

// SQUARE: the input and output are WIDTH wide and the weights 16-byte aligned (the host checks),
// so those widths, the stage pitch and the row walks are compile-time constants and the paths for
// other widths are not in the kernel (less code to fetch, fewer instructions per call: what small
// batches wait for).
template <typename T, int WIDTH, int STAGES, Epilogue HIDDEN, Epilogue OUT, bool SQUARE, bool ONEBLOB>
__device__ __forceinline__ void inference_body(const KernelShape& s, const ForwardArgs& args, const Plan& p) {
  static_assert(!ONEBLOB || (STAGES == 1 && !SQUARE && std::is_same_v<T, __half>),
                "behind OneBlob: one stage the features are made in, FP16 features");
  constexpr int KS = WIDTH / 16;
  constexpr int kSquarePitch = (WIDTH + kSmemPad) * static_cast<int>(sizeof(T));
  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t w_base = (px::shared_address(smem) + 1023u) & ~1023u;  // the swizzle works in 1024-byte blocks
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;  // 4 warps per warpgroup
  const int groups = blockDim.x / kGroupThreads, group = warp / 4, warp_in_group = warp % 4;
  const int in_width = SQUARE ? WIDTH : s.in_width, out_width = SQUARE ? WIDTH : s.out_width;
  const int in_chunks = SQUARE ? WIDTH / 8 : p.in_chunks, out_chunks = SQUARE ? WIDTH / 8 : p.out_chunks;
  const int pitch = SQUARE ? kSquarePitch : p.pitch, stage_bytes = kWarpRows * pitch;
  // With one input stage the next tile's rows are asked for as soon as layer 0 has read this one's,
  // and the output goes through a stage of its own.
  constexpr bool kOwnOut = own_out_stage(STAGES);
  const int out_pitch = kOwnOut ? out_stage_pitch(out_width, static_cast<int>(sizeof(T))) : pitch;
  const int warp_bytes = warp_stage_bytes(STAGES, stage_bytes, out_pitch);
  const uint32_t stages = w_base + p.weights_bytes + warp * warp_bytes;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * groups + group;
  const int64_t step = static_cast<int64_t>(gridDim.x) * groups;
  const int64_t batch = args.batch, n_tiles = p.n_tiles;
  const uint16_t* in = static_cast<const uint16_t*>(args.input);
  uint16_t* out = static_cast<uint16_t*>(args.output);
  TF_TIMELINE_MARK(kMarkEntry);
  // A lane's first row, lane / chunks: a shift in the square kernel, else by the reciprocal.
  const RowWalk in_walk(lane, SQUARE ? lane / in_chunks : lane_row(lane, p.in_per_chunk), in_chunks,
                        SQUARE ? kWarpSize / in_chunks : p.in_rows_per_step, p.ld_in, pitch);
  auto warp_row0 = [&](int64_t tile) { return tile * kGroupRows + warp_in_group * kWarpRows; };
  // Full tiles (all but the batch's last, partial one) copy without bounds.
  auto load_tile = [&](uint32_t stage, int64_t tile) {
    const int64_t row0 = warp_row0(tile);
    if (tile < p.full_tiles)
      load_full_rows<SQUARE, WIDTH / 8>(stage, in + row0 * p.ld_in, in_walk);
    else
      load_rows(stage, in + row0 * p.ld_in, in_walk, rows_inside(row0, batch), in);
  };

  // One commit group per tile, the weights in the first tile's: the first tile starts when its
  // rows and the weights have landed, with the next STAGES - 1 tiles still in flight. The first
  // rows go first: they come from DRAM, the weights (read by every block) mostly from the L2.
  OneBlobLane ob_lane;
  float ob_x[2] = {0.0f, 0.0f};  // the lane's positions of the tile it makes features for next
  if constexpr (ONEBLOB) {
    ob_lane = oneblob_lane(args.oneblob, lane, pitch);
    if (first < n_tiles) oneblob_positions(ob_x, args.oneblob, ob_lane, warp_row0(first), batch);
  } else {
    if (first < n_tiles) load_tile(stages, first);
  }
  const uint16_t* weights = static_cast<const uint16_t*>(args.weights);
  const bool aligned = SQUARE || (reinterpret_cast<uintptr_t>(weights) & 15) == 0;
  stage_weights<WIDTH>(w_base, weights, s, in_width, out_width, aligned, p);
  px::cp_async_commit();
  for (int st = 1; st < STAGES; ++st) {
    const int64_t tile = first + st * step;
    if (tile < n_tiles) load_tile(stages + st * stage_bytes, tile);
    px::cp_async_commit();
  }
  const RowWalk out_walk(lane, SQUARE ? lane / out_chunks : lane_row(lane, p.out_per_chunk), out_chunks,
                         SQUARE ? kWarpSize / out_chunks : p.out_rows_per_step, p.ld_out, out_pitch);
  TF_TIMELINE_MARK(kMarkIssued);
  px::cp_async_wait<STAGES - 1>();
  fence_proxy_async();
  __syncthreads();
  TF_TIMELINE_MARK(kMarkStaged);
  if constexpr (ONEBLOB) {  // the first tile's features; the others' are made while a tile runs
    if (first < n_tiles)
      for (int part = 0; part < kOneBlobParts; ++part) oneblob_part(stages, ob_x, args.oneblob, ob_lane, part);
  }

  int st = 0, n = 0;
  for (int64_t tile = first; tile < n_tiles; tile += step, ++n) {
    const uint32_t stage = stages + st * stage_bytes;
    const uint32_t out_stage = kOwnOut ? stages + stage_bytes : stage;
    const int64_t row0 = warp_row0(tile);
    // Behind OneBlob this tile's features are in the stage (made while the last tile's hidden
    // layers ran); the next tile's positions are asked for now and its features made meanwhile.
    auto next_tile = [&] { return tile + STAGES * step; };
    if constexpr (ONEBLOB) {
      if (next_tile() < n_tiles) oneblob_positions(ob_x, args.oneblob, ob_lane, warp_row0(next_tile()), batch);
    }
    px::cp_async_wait<STAGES - 1>();  // this tile's copies (this lane's) have landed
    __syncwarp();                      // ... and every lane's (or its features are in the stage)
    if (n < kMarkTiles) TF_TIMELINE_MARK(kMarkTile + 3 * n);

    {
      float d[WIDTH / 2];
      uint32_t a[KS][4];
      first_product<T, WIDTH>(d, stage, pitch, in_width, w_base, lane);
      if constexpr (kOwnOut) {
        __syncwarp();  // every lane's reads of the input in this stage are done before the next tile's land
        if constexpr (!ONEBLOB) {
          const int64_t next = next_tile();
          if (next < n_tiles) load_tile(stage, next);
          px::cp_async_commit();
        }
      }
      uint32_t w;
      if constexpr (ONEBLOB) {
        w = hidden_layers<T, WIDTH, HIDDEN>(a, d, w_base + p.first_layer_bytes, s, [&](int l) {
          if (l - 1 < kOneBlobParts && next_tile() < n_tiles) oneblob_part(stage, ob_x, args.oneblob, ob_lane, l - 1);
        });
      } else {
        w = hidden_layers<T, WIDTH, HIDDEN>(a, d, w_base + p.first_layer_bytes, s);
      }
      if constexpr (!kOwnOut) __syncwarp();  // every lane's reads of the input are done before the output overwrites it
      output_layer<T, WIDTH, OUT>(a, d, w, out_width, out_stage, out_pitch, s.out_act, lane);
      __syncwarp();
    }
    if (n < kMarkTiles) TF_TIMELINE_MARK(kMarkTile + 3 * n + 1);
    if (tile < p.full_tiles)
      store_full_rows<SQUARE, WIDTH / 8>(out_stage, out + row0 * p.ld_out, out_walk);
    else
      store_rows(out_stage, out + row0 * p.ld_out, out_walk, rows_inside(row0, batch));
    __syncwarp();  // the stage is read out before the next copy (or output) into it
    if (n < kMarkTiles) TF_TIMELINE_MARK(kMarkTile + 3 * n + 2);

    if constexpr (!kOwnOut) {
      const int64_t next = next_tile();
      if (next < n_tiles) load_tile(stage, next);
      px::cp_async_commit();
    }
    if constexpr (ONEBLOB) {  // the parts fewer hidden layers left over
      if (next_tile() < n_tiles)
        for (int part = s.n_hidden - 1 > 0 ? s.n_hidden - 1 : 0; part < kOneBlobParts; ++part)
          oneblob_part(stage, ob_x, args.oneblob, ob_lane, part);
    }
    st = st + 1 == STAGES ? 0 : st + 1;
  }
  px::cp_async_wait<0>();
  TF_TIMELINE_MARK(kMarkEnd);
}

// Register budgets: two blocks of two warpgroups per SM at 64 wide (128 registers; the square
// kernel takes 134 unbounded, the others 105-113; capping for three blocks, 80, spills), one
// block of three at 128 wide.
template <typename T, int WIDTH, int STAGES, Epilogue HIDDEN, Epilogue OUT, bool SQUARE, bool ONEBLOB = false>
__global__ void __launch_bounds__(max_groups(WIDTH) * kGroupThreads, min_blocks_per_sm(WIDTH))
    inference_kernel(KernelShape s, ForwardArgs args, Plan p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  inference_body<T, WIDTH, STAGES, HIDDEN, OUT, SQUARE, ONEBLOB>(s, args, p);
#else
  __trap();  // built for sm_90a only; hopper/inference.cu launches it on compute capability 9.0 only
#endif
}

}  // namespace tinyfuse::cuda::fused::wgmma
