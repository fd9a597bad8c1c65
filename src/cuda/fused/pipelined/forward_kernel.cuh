// FullyFusedMLP's pipelined forward kernel (CUDA, sm_80+), for inference (pipelined/inference.cu,
// KEEP = false) and for training (pipelined/training_forward.cu, KEEP = true: also writes every hidden
// layer's y, z where kept, and the output layer's z, as ForwardArgs asks). Same values as
// fused_forward_kernel, bit for bit (same products in the same order, same rounding points; see
// launch.h), laid out for memory bandwidth the way Width64FusedMLP's kernel is:
//  - a persistent grid; each warp owns tiles of kRows consecutive rows (tile = the warp's global
//    index + i * all warps), and every layer's weights are loaded once per block into shared
//    memory (padded rows, kernel_common.cuh);
//  - a tile's input rows are copied global -> shared with 16-byte cp.async into one of two
//    per-warp stage buffers while the previous tile is computed;
//  - layer 0 reads its A fragments from the stage with ldmatrix; later layers keep activations
//    in registers (a layer's FP32 accumulators, rounded, are the next layer's A fragments);
//  - the output layer writes its fragments back into the (now free) stage, from where the warp
//    stores whole rows with 16-byte stores, and (training, args.loss set) evaluates the loss on
//    them (loss_epilogue.cuh) so that the output need not leave the chip; with KEEP, every hidden layer's y (and z) goes out the
//    same way once the layer is done (the stage is free from layer 0's end on: layer 0 holds its
//    z in registers until every lane has read the input).
// The activation is a template parameter for ReLU hidden layers and identity outputs (most
// networks), a run-time switch otherwise. Stage rows are padded by 16 bytes, which puts the 8
// rows of every ldmatrix / stmatrix phase into distinct banks for any width that is a multiple
// of 16. Rows past the batch are zero-filled on load and never stored.
// Each including unit instantiates one KEEP value (the two compile in parallel).
#pragma once

#include <algorithm>

#include "cuda/fused/epilogue.cuh"
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/pipelined/loss_epilogue.cuh"
#include "cuda/primitives/mma.cuh"
#include "cuda/fused/plan.h"
#include "cuda/primitives/cp_async.cuh"
#include "cuda/primitives/ldmatrix.cuh"
#include "cuda/primitives/mma_sync.cuh"

namespace tinyfuse::cuda::fused {

namespace {

namespace px = tinyfuse::cuda::ptx;

template <int WIDTH>
struct PipelineTiling {
  static_assert(WIDTH == 16 || WIDTH == 32 || WIDTH == 64 || WIDTH == 128, "hidden width must be 16, 32, 64 or 128");
  static constexpr int kMTiles = WIDTH <= 32 ? 4 : 2;  // 16-row blocks per warp tile
  static constexpr int kRows = 16 * kMTiles;
  static constexpr int kKSteps = WIDTH / 16;
  // Accumulator tiles (8 columns) of one pass over a hidden layer's weights: 32 columns at a time
  // keep 16 * kMTiles floats live beside the layer's input and output fragments.
  static constexpr int kPassTiles = WIDTH >= 32 ? 4 : 2;
  static constexpr int kPasses = WIDTH / (8 * kPassTiles);
  // Layer 0 reads its A fragments from shared memory: up to 64 wide in one pass (read once).
  static constexpr int kFirstPassTiles = WIDTH <= 64 ? WIDTH / 8 : 4;
  static constexpr int kFirstPasses = WIDTH / (8 * kFirstPassTiles);
  static constexpr int kMinBlocksPerSm = WIDTH == 128 ? 2 : 3;  // register cap 255 / 168
};
// Stage buffers per warp: the tile being computed + the one in flight. Where every layer's weights
// and two stages do not fit shared memory, the training forward runs with one (plan_width): the
// next tile's copy then starts when the tile is done, and the block's other warps cover its wait.
constexpr int kStages = 2;

// Layer 0's z, held as A fragments until the input in the stage is no longer read.
template <int WIDTH>
using FirstZ = uint32_t[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kKSteps][4];

// Byte address of the ldmatrix row lane `lane` supplies for the A block (rows 16 mt.., columns
// col0..col0 + 15) of a row-major matrix in shared memory: matrices (rows +0, cols +0),
// (+8, +0), (+0, +8), (+8, +8) = the A-fragment registers of mma m16n8k16. stmatrix uses the same.
__device__ __forceinline__ uint32_t a_block_row(uint32_t base, int stride_bytes, int mt, int col0, int lane) {
  const int r = mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  return base + r * stride_bytes + (col0 + (lane >> 4) * 8) * 2;
}
// The same for the B fragments of the 8-column tiles n0 and n0 + 8 at k-step ks, from W (out x in,
// row-major): matrices (n0, k +0), (n0, k +8), (n0 + 8, k +0), (n0 + 8, k +8).
__device__ __forceinline__ uint32_t b_pair_row(uint32_t w, int stride_bytes, int n0, int ks, int lane) {
  const int q = lane >> 3;
  return w + (n0 + (q >> 1) * 8 + (lane & 7)) * stride_bytes + (16 * ks + (q & 1) * 8) * 2;
}

// One 16 x 16 block in A-fragment registers (o) into rows 16 mt.., columns col0.. of the stage.
__device__ __forceinline__ void put_block(uint32_t stage, int stage_stride, int mt, int col0, const uint32_t (&o)[4],
                                          int lane) {
#if __CUDA_ARCH__ >= 900
  px::stmatrix_x4(a_block_row(stage, stage_stride, mt, col0, lane), o);
#else
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 4; ++r)  // register r: rows +8 when odd, columns +8 when >= 2
    px::st_shared_4(stage + (mt * 16 + g + (r & 1) * 8) * stage_stride + (col0 + (r >> 1) * 8 + 2 * t) * 2, o[r]);
#endif
}

// A (kRows x WIDTH) activation held as A fragments into the stage, columns 0..WIDTH - 1.
template <int WIDTH>
__device__ __forceinline__ void put_fragments(
    uint32_t stage, int stage_stride, const uint32_t (&x)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kKSteps][4],
    int lane) {
#pragma unroll
  for (int mt = 0; mt < PipelineTiling<WIDTH>::kMTiles; ++mt)
#pragma unroll
    for (int k = 0; k < PipelineTiling<WIDTH>::kKSteps; ++k) put_block(stage, stage_stride, mt, 16 * k, x[mt][k], lane);
}

// Whether a pass's epilogue goes pair by pair with z formed after y (training, except where
// run_time_activation.cuh's kKeepZFirst has the Generic epilogue store z first and then finish
// the accumulators in place, as inference does).
template <Epilogue E, int WIDTH, bool KEEP>
constexpr bool keep_pairwise() {
  return KEEP && !(E == Epilogue::Generic && kKeepZFirst<WIDTH>);
}

// y = finish(x W^T) for a hidden layer, x and y as A fragments in registers; W in shared memory
// (WIDTH x WIDTH, row stride WIDTH + kSmemPad). With zstage (Generic only), z goes into the stage.
template <typename T, int WIDTH, Epilogue E, bool KEEP>
__device__ __forceinline__ void hidden_layer(
    uint32_t (&y)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kKSteps][4],
    const uint32_t (&x)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kKSteps][4], uint32_t w, Activation act,
    int lane, bool keep_z, uint32_t zstage, int stage_stride) {
  using Tl = PipelineTiling<WIDTH>;
  constexpr int stride = (WIDTH + kSmemPad) * 2;
#pragma unroll
  for (int pass = 0; pass < Tl::kPasses; ++pass) {
    float acc[Tl::kMTiles][Tl::kPassTiles][4] = {};
#pragma unroll
    for (int ks = 0; ks < Tl::kKSteps; ++ks)
#pragma unroll
      for (int p = 0; p < Tl::kPassTiles / 2; ++p) {
        uint32_t b[4];
        px::ldmatrix_x4(b, b_pair_row(w, stride, (pass * Tl::kPassTiles + 2 * p) * 8, ks, lane));
#pragma unroll
        for (int mt = 0; mt < Tl::kMTiles; ++mt) {
          mma_16816<T>(acc[mt][2 * p], x[mt][ks], b[0], b[1]);
          mma_16816<T>(acc[mt][2 * p + 1], x[mt][ks], b[2], b[3]);
        }
      }
    // z (training, Generic, when kept) into the stage.
    auto put_z = [&] {
      if constexpr (KEEP && E == Epilogue::Generic) {
        if (keep_z) {
#pragma unroll
          for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
            for (int n = 0; n < Tl::kPassTiles; n += 2) {
              const uint32_t z[4] = {z_pair<T>(acc[mt][n][0], acc[mt][n][1]), z_pair<T>(acc[mt][n][2], acc[mt][n][3]),
                                     z_pair<T>(acc[mt][n + 1][0], acc[mt][n + 1][1]),
                                     z_pair<T>(acc[mt][n + 1][2], acc[mt][n + 1][3])};
              put_block(zstage, stage_stride, mt, (pass * Tl::kPassTiles + n) * 8, z, lane);
            }
        }
      }
    };
    if constexpr (keep_pairwise<E, WIDTH, KEEP>()) {
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < Tl::kPassTiles; ++n) {
          const int tile = pass * Tl::kPassTiles + n;  // 8-column tile of the layer's output
          y[mt][tile / 2][(tile % 2) * 2 + 0] = finish_pair<T, E>(acc[mt][n][0], acc[mt][n][1], act);
          y[mt][tile / 2][(tile % 2) * 2 + 1] = finish_pair<T, E>(acc[mt][n][2], acc[mt][n][3], act);
        }
      put_z();
    } else {
      // The Generic epilogue on the whole pass at once (epilogue.cuh, finish_block), z first.
      put_z();
      finish_block<T, E>(acc, act);
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < Tl::kPassTiles; ++n) {
          const int tile = pass * Tl::kPassTiles + n;
          y[mt][tile / 2][(tile % 2) * 2 + 0] = finish_pair<T, finished(E)>(acc[mt][n][0], acc[mt][n][1], act);
          y[mt][tile / 2][(tile % 2) * 2 + 1] = finish_pair<T, finished(E)>(acc[mt][n][2], acc[mt][n][3], act);
        }
    }
  }
}

// Layer 0: the same with the A fragments read from the stage buffer (in_width columns); z (when
// kept) into registers, since the stage still holds the input.
template <typename T, int WIDTH, Epilogue E, bool KEEP>
__device__ __forceinline__ void first_layer(uint32_t (&y)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kKSteps][4],
                                            uint32_t stage, int stage_stride, int in_width, uint32_t w,
                                            Activation act, int lane, bool keep_z, FirstZ<WIDTH>& z) {
  using Tl = PipelineTiling<WIDTH>;
  const int stride = (in_width + kSmemPad) * 2;
#pragma unroll
  for (int pass = 0; pass < Tl::kFirstPasses; ++pass) {
    float acc[Tl::kMTiles][Tl::kFirstPassTiles][4] = {};
#pragma unroll 2
    for (int ks = 0; ks < in_width / 16; ++ks) {
      uint32_t a[Tl::kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt) px::ldmatrix_x4(a[mt], a_block_row(stage, stage_stride, mt, 16 * ks, lane));
#pragma unroll
      for (int p = 0; p < Tl::kFirstPassTiles / 2; ++p) {
        uint32_t b[4];
        px::ldmatrix_x4(b, b_pair_row(w, stride, (pass * Tl::kFirstPassTiles + 2 * p) * 8, ks, lane));
#pragma unroll
        for (int mt = 0; mt < Tl::kMTiles; ++mt) {
          mma_16816<T>(acc[mt][2 * p], a[mt], b[0], b[1]);
          mma_16816<T>(acc[mt][2 * p + 1], a[mt], b[2], b[3]);
        }
      }
    }
    // z of tile n (training, Generic, when kept) into registers.
    auto keep_first_z = [&](int mt, int n) {
      if constexpr (KEEP && E == Epilogue::Generic) {
        if (keep_z) {
          const int tile = pass * Tl::kFirstPassTiles + n;
          z[mt][tile / 2][(tile % 2) * 2 + 0] = z_pair<T>(acc[mt][n][0], acc[mt][n][1]);
          z[mt][tile / 2][(tile % 2) * 2 + 1] = z_pair<T>(acc[mt][n][2], acc[mt][n][3]);
        }
      }
    };
    if constexpr (keep_pairwise<E, WIDTH, KEEP>()) {
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < Tl::kFirstPassTiles; ++n) {
          const int tile = pass * Tl::kFirstPassTiles + n;
          y[mt][tile / 2][(tile % 2) * 2 + 0] = finish_pair<T, E>(acc[mt][n][0], acc[mt][n][1], act);
          y[mt][tile / 2][(tile % 2) * 2 + 1] = finish_pair<T, E>(acc[mt][n][2], acc[mt][n][3], act);
          keep_first_z(mt, n);
        }
    } else {
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < Tl::kFirstPassTiles; ++n) keep_first_z(mt, n);
      finish_block<T, E>(acc, act);
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < Tl::kFirstPassTiles; ++n) {
          const int tile = pass * Tl::kFirstPassTiles + n;
          y[mt][tile / 2][(tile % 2) * 2 + 0] = finish_pair<T, finished(E)>(acc[mt][n][0], acc[mt][n][1], act);
          y[mt][tile / 2][(tile % 2) * 2 + 1] = finish_pair<T, finished(E)>(acc[mt][n][2], acc[mt][n][3], act);
        }
    }
  }
}

// The output layer, 16 columns at a time, into the stage buffer (out_width columns); with
// keep_z (Generic only), z beside it (columns out_width .. 2 out_width - 1).
template <typename T, int WIDTH, Epilogue E, bool KEEP>
__device__ __forceinline__ void output_layer(const uint32_t (&x)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kKSteps][4],
                                             uint32_t w, int out_width, uint32_t stage, int stage_stride,
                                             Activation act, int lane, bool keep_z) {
  using Tl = PipelineTiling<WIDTH>;
  constexpr int stride = (WIDTH + kSmemPad) * 2;
  for (int c0 = 0; c0 < out_width; c0 += 16) {
    float acc[Tl::kMTiles][2][4] = {};
#pragma unroll
    for (int ks = 0; ks < Tl::kKSteps; ++ks) {
      uint32_t b[4];
      px::ldmatrix_x4(b, b_pair_row(w, stride, c0, ks, lane));
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt) {
        mma_16816<T>(acc[mt][0], x[mt][ks], b[0], b[1]);
        mma_16816<T>(acc[mt][1], x[mt][ks], b[2], b[3]);
      }
    }
    // z (training, Generic, when kept) beside the output in the stage.
    auto put_z = [&](int mt) {
      if constexpr (KEEP && E == Epilogue::Generic) {
        if (keep_z) {
          const uint32_t z[4] = {z_pair<T>(acc[mt][0][0], acc[mt][0][1]), z_pair<T>(acc[mt][0][2], acc[mt][0][3]),
                                 z_pair<T>(acc[mt][1][0], acc[mt][1][1]), z_pair<T>(acc[mt][1][2], acc[mt][1][3])};
          put_block(stage, stage_stride, mt, out_width + c0, z, lane);
        }
      }
    };
    if constexpr (keep_pairwise<E, WIDTH, KEEP>()) {
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt) {
        const uint32_t o[4] = {finish_pair<T, E>(acc[mt][0][0], acc[mt][0][1], act),
                               finish_pair<T, E>(acc[mt][0][2], acc[mt][0][3], act),
                               finish_pair<T, E>(acc[mt][1][0], acc[mt][1][1], act),
                               finish_pair<T, E>(acc[mt][1][2], acc[mt][1][3], act)};
        put_block(stage, stage_stride, mt, c0, o, lane);
        put_z(mt);
      }
    } else {
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt) put_z(mt);
      finish_block<T, E>(acc, act);
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt) {
        const uint32_t o[4] = {finish_pair<T, finished(E)>(acc[mt][0][0], acc[mt][0][1], act),
                               finish_pair<T, finished(E)>(acc[mt][0][2], acc[mt][0][3], act),
                               finish_pair<T, finished(E)>(acc[mt][1][0], acc[mt][1][1], act),
                               finish_pair<T, finished(E)>(acc[mt][1][2], acc[mt][1][3], act)};
        put_block(stage, stage_stride, mt, c0, o, lane);
      }
    }
  }
}

// Walks the 16-byte chunks lane, lane + 32, ... of a (rows x chunks) tile as (row, chunk) pairs
// without a division per step.
struct ChunkWalk {
  int r, c, dr, dc, chunks;
  __device__ ChunkWalk(int lane, int chunks_per_row)
      : r(lane / chunks_per_row), c(lane % chunks_per_row), dr(kWarpSize / chunks_per_row),
        dc(kWarpSize % chunks_per_row), chunks(chunks_per_row) {}
  __device__ void next() {
    r += dr;
    c += dc;
    if (c >= chunks) {
      c -= chunks;
      ++r;
    }
  }
};

// Rows [row0, row0 + ROWS) of a (batch x width) matrix into a stage (row stride stage_stride),
// 16 bytes per copy; rows past the batch become zeros.
template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t stage, int stage_stride, const void* in, int64_t ld, int width,
                                          int64_t row0, int64_t batch, int lane) {
  const uint16_t* base = static_cast<const uint16_t*>(in);
  for (ChunkWalk w(lane, width / 8); w.r < ROWS; w.next()) {
    const int64_t row = row0 + w.r;
    const bool valid = row < batch;
    px::cp_async_16(stage + w.r * stage_stride + w.c * 16, base + (valid ? row * ld + w.c * 8 : 0), valid ? 16u : 0u);
  }
}

// The reverse, rows past the batch not stored. The output is not read again (streaming stores);
// kept activations are, by backward() (plain stores: they may stay in L2).
template <int ROWS, bool STREAMING>
__device__ __forceinline__ void store_tile(uint32_t stage, int stage_stride, void* out, int64_t ld, int width,
                                           int64_t row0, int64_t batch, int lane) {
  uint16_t* base = static_cast<uint16_t*>(out);
  for (ChunkWalk w(lane, width / 8); w.r < ROWS; w.next()) {
    const int64_t row = row0 + w.r;
    if (row >= batch) continue;
    const uint4 v = px::ld_shared_16(stage + w.r * stage_stride + w.c * 16);
    if constexpr (STREAMING)
      px::st_global_streaming_16(base + row * ld + w.c * 8, v);
    else
      *reinterpret_cast<uint4*>(base + row * ld + w.c * 8) = v;
  }
}

// Every layer's weights into shared memory (the resident layout of kernel_common.cuh), by the
// whole block: 16-byte cp.async when the parameters are 16-byte aligned (every layer then starts
// aligned: its offset is a multiple of 16 x 16 elements), else stage_weights' loads. Waits for
// the block.
template <int WIDTH, typename T>
__device__ __forceinline__ void stage_weights_async(unsigned char* smem, const T* weights, const KernelShape& s) {
  if ((reinterpret_cast<uintptr_t>(weights) & 15) != 0) {
    stage_all_layers<WIDTH>(reinterpret_cast<T*>(smem), weights, s);
    return;
  }
  const uint32_t base = px::shared_address(smem);
  for (int l = 0; l <= s.n_hidden; ++l) {
    const int rows = layer_out(WIDTH, s, l), cols = layer_in(WIDTH, s, l), chunks = cols / 8;
    const T* src = weights + layer_weight_offset(WIDTH, s, l);
    const uint32_t dst = base + 2 * static_cast<uint32_t>(layer_smem_offset(WIDTH, s, l));
    const int stride = (cols + kSmemPad) * 2;
    for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
      const int r = i / chunks, c = i - r * chunks;
      px::cp_async_16(dst + r * stride + c * 16, src + static_cast<int64_t>(r) * cols + c * 8, 16u);
    }
  }
  px::cp_async_commit();
  px::cp_async_wait<0>();
  __syncthreads();
}

// Layer l's kept matrix (dense, batch x WIDTH) in a ForwardArgs buffer.
template <typename T, int WIDTH>
__device__ __forceinline__ void* kept_matrix(void* base, int l, int64_t batch) {
  return static_cast<T*>(base) + static_cast<int64_t>(l) * batch * WIDTH;
}

// The kernel's body (sm_80+; pipelined_forward_kernel below chooses where it is compiled).
template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, bool KEEP, int STAGES>
__device__ __forceinline__ void pipelined_forward_body(KernelShape s, ForwardArgs args, int weight_bytes,
                                                    int stage_stride, int64_t n_tiles) {
  using Tl = PipelineTiling<WIDTH>;
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int stage_bytes = Tl::kRows * stage_stride;
  const uint32_t stages = px::shared_address(smem + weight_bytes + warp * STAGES * stage_bytes);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  const int64_t batch = args.batch;
  const bool keep_z = KEEP && args.hidden_z != nullptr;
  const bool keep_out_z = KEEP && args.out_z != nullptr;

  // One commit group per tile: the first STAGES tiles are in flight while the weights are staged
  // (whose wait, for all groups, also lands them; the loop's waits then count from there).
  for (int st = 0; st < STAGES; ++st) {
    const int64_t tile = first + st * step;
    if (tile < n_tiles)
      load_tile<Tl::kRows>(stages + st * stage_bytes, stage_stride, args.input, args.ld_in, s.in_width,
                           tile * Tl::kRows, batch, lane);
    px::cp_async_commit();
  }
  stage_weights_async<WIDTH>(smem, static_cast<const T*>(args.weights), s);  // waits for the tiles too
  const uint32_t w_base = px::shared_address(smem);

  int st = 0;
  for (int64_t tile = first; tile < n_tiles; tile += step) {
    const uint32_t stage = stages + st * stage_bytes;
    const int64_t row0 = tile * Tl::kRows;
    if constexpr (KEEP) {
      if (args.loss.gradients) prefetch_target<Tl::kRows>(args.loss, row0, batch, lane);
    }
    px::cp_async_wait<STAGES - 1>();  // this tile's copies (this lane's) have landed
    __syncwarp();                      // ... and every lane's

    uint32_t a[Tl::kMTiles][Tl::kKSteps][4], h[Tl::kMTiles][Tl::kKSteps][4];
    FirstZ<WIDTH> z0;
    first_layer<T, WIDTH, HIDDEN, KEEP>(h, stage, stage_stride, s.in_width, w_base, s.act, lane, keep_z, z0);
    __syncwarp();  // every lane's reads of the input in this stage are done before it is overwritten
    if constexpr (KEEP) {
      // Layer 0's z, then y: each through the stage, whole rows to global memory.
      if (keep_z) {
        put_fragments<WIDTH>(stage, stage_stride, z0, lane);
        __syncwarp();
        store_tile<Tl::kRows, false>(stage, stage_stride, args.hidden_z, WIDTH, WIDTH, row0, batch, lane);
        __syncwarp();
      }
      put_fragments<WIDTH>(stage, stage_stride, h, lane);
      __syncwarp();
      store_tile<Tl::kRows, false>(stage, stage_stride, args.hidden_y, WIDTH, WIDTH, row0, batch, lane);
      __syncwarp();
    }
    for (int l = 1; l < s.n_hidden; ++l) {
      hidden_layer<T, WIDTH, HIDDEN, KEEP>(a, h, w_base + 2 * static_cast<uint32_t>(layer_smem_offset(WIDTH, s, l)),
                                           s.act, lane, keep_z, stage, stage_stride);
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
        for (int k = 0; k < Tl::kKSteps; ++k)
#pragma unroll
          for (int i = 0; i < 4; ++i) h[mt][k][i] = a[mt][k][i];
      if constexpr (KEEP) {
        __syncwarp();
        if (keep_z) {  // hidden_layer left z in the stage
          store_tile<Tl::kRows, false>(stage, stage_stride, kept_matrix<T, WIDTH>(args.hidden_z, l, batch), WIDTH,
                                       WIDTH, row0, batch, lane);
          __syncwarp();
        }
        put_fragments<WIDTH>(stage, stage_stride, h, lane);
        __syncwarp();
        store_tile<Tl::kRows, false>(stage, stage_stride, kept_matrix<T, WIDTH>(args.hidden_y, l, batch), WIDTH,
                                     WIDTH, row0, batch, lane);
        __syncwarp();
      }
    }
    output_layer<T, WIDTH, OUT, KEEP>(h, w_base + 2 * static_cast<uint32_t>(layer_smem_offset(WIDTH, s, s.n_hidden)),
                                      s.out_width, stage, stage_stride, s.out_act, lane, keep_out_z);
    __syncwarp();
    if (!KEEP || args.output)
      store_tile<Tl::kRows, true>(stage, stage_stride, args.output, args.ld_out, s.out_width, row0, batch, lane);
    if (keep_out_z)
      store_tile<Tl::kRows, false>(stage + 2 * s.out_width, stage_stride, args.out_z, s.out_width, s.out_width, row0,
                                   batch, lane);
    if constexpr (KEEP) {
      if (args.loss.gradients) {
        __syncwarp();  // the output's store (if any) has read the stage the loss overwrites
        loss_epilogue_of_kind<T, Tl::kRows, ChunkWalk>(stage, stage_stride, s.out_width, args.loss, row0, batch, lane);
      }
    }
    __syncwarp();  // the stage is read out before the next copy into it

    const int64_t next = tile + STAGES * step;
    if (next < n_tiles)
      load_tile<Tl::kRows>(stage, stage_stride, args.input, args.ld_in, s.in_width, next * Tl::kRows, batch, lane);
    px::cp_async_commit();
    st = st + 1 == STAGES ? 0 : st + 1;
  }
  px::cp_async_wait<0>();
}

// The training variants (KEEP) are built for sm_90+ only: on sm_80 ptxas (CUDA 13.0) spills them
// at the register cap of kMinBlocksPerSm (64-224 B of stack with hundreds of local loads in the
// 128-wide and run-time-activation variants; the audit refuses spills), while sm_90 fits them.
// plan_pipelined_training_forward chooses them on sm_90+ only; sm_80-89 train through fused_forward_kernel.
constexpr int kPipelinedKeepMinArch = 900;

template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, bool KEEP, int STAGES>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize, PipelineTiling<WIDTH>::kMinBlocksPerSm)
    pipelined_forward_kernel(KernelShape s, ForwardArgs args, int weight_bytes, int stage_stride, int64_t n_tiles) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (KEEP && __CUDA_ARCH__ < kPipelinedKeepMinArch)
    __trap();  // never launched: plan_pipelined_training_forward checks for sm_90 first
  else
    pipelined_forward_body<T, WIDTH, HIDDEN, OUT, KEEP, STAGES>(s, args, weight_bytes, stage_stride, n_tiles);
#else
  __trap();  // never launched: plan_pipelined checks for sm_80 first
#endif
}

template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, bool KEEP, int STAGES>
FusedPlan plan_stages(const PlanInputs& in) {
  using Tl = PipelineTiling<WIDTH>;
  const FusedShape& shape = in.shape;
  const SmemPlan plan = plan_smem(shape, sizeof(T), static_cast<size_t>(-1));  // every layer resident
  const size_t weight_bytes = (plan.bytes + 15) / 16 * 16;
  // The stage holds a tile's input, then (KEEP) each hidden layer's y or z, then its output (and z).
  int stage_cols = std::max(shape.in_width, shape.out_width);
  if (KEEP) stage_cols = std::max({stage_cols, shape.width, output_keeps_z(shape.out_act) ? 2 * shape.out_width : 0});
  const int stage_stride = (stage_cols + kSmemPad) * static_cast<int>(sizeof(T));
  const size_t smem = weight_bytes + static_cast<size_t>(kWarpsPerBlock) * STAGES * Tl::kRows * stage_stride;
  const void* kernel = reinterpret_cast<const void*>(pipelined_forward_kernel<T, WIDTH, HIDDEN, OUT, KEEP, STAGES>);
  const int64_t n_tiles = (in.batch + Tl::kRows - 1) / Tl::kRows;
  const int64_t blocks = persistent_grid_blocks(*in.device, kernel, kWarpsPerBlock * kWarpSize, smem, n_tiles, kWarpsPerBlock);
  FusedPlan p;
  if (blocks < 1) return p;  // too deep for shared memory
  p.kernel = FusedKernel::Pipelined;
  p.function = kernel;
  p.blocks = static_cast<unsigned>(blocks);
  p.threads = kWarpsPerBlock * kWarpSize;
  p.smem = smem;
  p.params.shape = kernel_shape(shape, true);
  p.params.n_tiles = n_tiles;
  p.params.weight_bytes = static_cast<int>(weight_bytes);
  p.params.stage_stride = stage_stride;
  return p;
}

// Two stages where they fit; one for the 128-wide training forward where they do not (W2's 128 x 5
// behind OneBlob: 174 KiB of weights + 68 KiB of two stages > 227 KiB; 208 KiB with one). Inference
// at 128 wide runs the Hopper kernel on sm_90, where the training variants are built.
template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, bool KEEP>
FusedPlan plan_variant(const PlanInputs& in) {
  FusedPlan p = plan_stages<T, WIDTH, HIDDEN, OUT, KEEP, kStages>(in);
  if constexpr (KEEP && WIDTH == 128) {
    if (p.kernel == FusedKernel::None) p = plan_stages<T, WIDTH, HIDDEN, OUT, KEEP, 1>(in);
  }
  return p;
}

template <typename T, int WIDTH, bool KEEP>
// Other hidden activations share one instance (Generic, Generic): with no output activation its
// run-time epilogue gives the Identity epilogue's bits, at the cost of one switch per tile.
FusedPlan plan_width(const PlanInputs& in) {
  const bool relu = in.shape.act == Activation::ReLU, identity_out = in.shape.out_act == Activation::None;
  if (relu && identity_out) return plan_variant<T, WIDTH, Epilogue::Relu, Epilogue::Identity, KEEP>(in);
  if (relu) return plan_variant<T, WIDTH, Epilogue::Relu, Epilogue::Generic, KEEP>(in);
  return plan_variant<T, WIDTH, Epilogue::Generic, Epilogue::Generic, KEEP>(in);
}

template <typename T, bool KEEP>
FusedPlan plan_typed(const PlanInputs& in) {
  switch (in.shape.width) {
    case 16: return plan_width<T, 16, KEEP>(in);
    case 32: return plan_width<T, 32, KEEP>(in);
    case 64: return plan_width<T, 64, KEEP>(in);
    case 128: return plan_width<T, 128, KEEP>(in);
  }
  return {};
}

// The kernel's plan where it takes the call at all: a CUDA device of sm_80+ (cp.async,
// ldmatrix-fed m16n8k16), an input and output the stage can hold.
template <bool KEEP>
FusedPlan plan_pipelined(const PlanInputs& in) {
  if (in.batch <= 0 || in.device->major < 8) return {};
  if (in.shape.in_width > kPipelinedMaxIoWidth || in.shape.out_width > kPipelinedMaxIoWidth) return {};
  if (in.dtype == DType::F16) return plan_typed<__half, KEEP>(in);
  if (in.dtype == DType::BF16) return plan_typed<__nv_bfloat16, KEEP>(in);
  return {};
}

}  // namespace

}  // namespace tinyfuse::cuda::fused
