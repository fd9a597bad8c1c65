// FullyFusedMLP's pipelined backward kernel (CUDA, sm_80+): fused_backward_kernel (backward.cu)
// laid out for memory bandwidth as the pipelined forward is (pipelined/forward_kernel.cuh, whose tiling and
// stage helpers it uses), writing the same bits: the same m16n8k16 products accumulated in the
// same order per element (k-steps ascending from zero), the same rounding points (dY = round(acc),
// dZ = dz_pair(dY, saved), dL/dinput = round(acc)).
//  - a persistent grid; each warp owns tiles of kRows rows; every layer's weights are staged once
//    per block (read transposed with ldmatrix .trans: the backward's B operand is W itself);
//  - a tile is a sequence of items, each a per-warp stage buffer's worth of rows: item 0 holds
//    dL/doutput (and out_z beside it), item k >= 1 the saved derivative (y or z) of hidden layer
//    n_hidden - k. Items stream through a ring of kBwdBuffers buffers with 16-byte cp.async, one
//    item ahead of the one being computed (across tiles too). Where every layer's weights and the
//    ring do not fit shared memory (128 wide, deep: W2's 128 x 5), a warp has one buffer for the
//    saved rows and a narrow one for item 0 (kOneBuffer): the next item's copy starts when the
//    buffer is free, and the block's other warps cover its wait;
//  - the output layer's dZ is formed in place in item 0's buffer (nothing to do for an identity
//    output), stored from there, and read from there with ldmatrix as the A operand of the last
//    hidden layer's dY; later layers keep dZ in registers (the accumulators' pairs are A
//    fragments); a hidden layer's saved rows are read as 16 x 16 blocks with ldmatrix, which gives
//    exactly the per-register pairs of the accumulators; its dZ then goes into the same buffer
//    and out as whole rows with 16-byte stores; dL/dinput likewise.
// ReLU hidden layers with an identity output are specialised; other activations are chosen at
// run time. Rows past the batch are zero-filled on load and never stored.
#pragma once

#include <cstring>
#include <type_traits>

#include "cuda/fused/pipelined/forward_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

constexpr int kBwdBuffers = 3;  // the item being computed, the one before it (read by the next
                                // item's product only when it is item 0) and the one in flight
constexpr int kOneBuffer = 1;   // BUFFERS of the variant with one buffer + item 0's own

// Bytes per row of item 0's buffer in the one-buffer variant: dL/doutput, out_z beside it where
// the output activation keeps it (kSmemPad as every stage row).
__host__ __device__ constexpr int output_item_stride(int out_width, bool keeps_z, int elem_bytes) {
  return ((keeps_z ? 2 : 1) * out_width + kSmemPad) * elem_bytes;
}

// The backward kernels are built for (and launched on) sm_80+; see pipelined/backward.cu.
constexpr int kPipelinedBackwardMinArch = 800;

template <int WIDTH>
using DzFrags = uint32_t[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kKSteps][4];

// dst = src, register by register (arrays do not assign): the dZ just formed becomes the layer
// above's for the next item.
template <int WIDTH>
__device__ __forceinline__ void copy_fragments(DzFrags<WIDTH>& dst, const DzFrags<WIDTH>& src) {
#pragma unroll
  for (int mt = 0; mt < PipelineTiling<WIDTH>::kMTiles; ++mt)
#pragma unroll
    for (int ks = 0; ks < PipelineTiling<WIDTH>::kKSteps; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) dst[mt][ks][i] = src[mt][ks][i];
}

// Byte address of the ldmatrix .trans row lane `lane` supplies for the B fragments of the
// 8-column tiles n0 and n0 + 8 at k rows k0 .. k0 + 15 of W (K x N, row-major in shared memory):
// matrices (k +0, n0), (k +8, n0), (k +0, n0 + 8), (k +8, n0 + 8), as backward.cu's product_step.
__device__ __forceinline__ uint32_t bt_pair_row(uint32_t w, int stride_bytes, int k0, int n0, int lane) {
  const int q = lane >> 3;
  return w + (k0 + (q & 1) * 8 + (lane & 7)) * stride_bytes + (n0 + (q >> 1) * 8) * 2;
}

// dZ of a ReLU hidden layer for one fragment register: round(dY) * act'(y), 1 where the saved y
// (+0 or positive: the forward's Epilogue::Relu) is above 0 and 0 elsewhere, as dz_pair computes
// it, but on the packed pair in T: the products by 1 and 0 are exact in T as in FP32, so these are
// dz_pair's bits (signed zeros, NaN for Inf * 0 included) in three instructions (pack, compare,
// multiply) instead of about ten (ncu: dZ was 18 % of the one-kernel training pass's instructions).
template <typename T>
__device__ __forceinline__ uint32_t relu_dz_pair(float dy_lo, float dy_hi, uint32_t saved_y) {
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  uint32_t dy_bits = pack2<T>(dy_lo, dy_hi), out;
  T2 dy, y;
  memcpy(&dy, &dy_bits, 4);
  memcpy(&y, &saved_y, 4);
  T2 zero;
  if constexpr (std::is_same_v<T, __half>)
    zero = __float2half2_rn(0.0f);
  else
    zero = __float2bfloat162_rn(0.0f);
  const T2 d = __hmul2(dy, __hgt2(y, zero));  // __hgt2: 1 or 0 per half
  memcpy(&out, &d, 4);
  return out;
}

// dZ of a hidden layer with activation A (None or ReLU) for one pass, from its dY accumulators
// (acc) and the saved values (sv, A fragments as hidden_dz reads them): dz_pair element by element.
template <typename T, int WIDTH, Activation A>
__device__ __forceinline__ void activation_dz(DzFrags<WIDTH>& dz,
                                              const float (&acc)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kPassTiles][4],
                                              const uint32_t (&sv)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kPassTiles / 2][4],
                                              int pass) {
  using Tl = PipelineTiling<WIDTH>;
#pragma unroll
  for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < Tl::kPassTiles; n += 2) {
      const int tile = pass * Tl::kPassTiles + n;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float(&c)[4] = acc[mt][n + (r >> 1)];
        const float dy0 = round_to<T>(c[2 * (r & 1)]), dy1 = round_to<T>(c[2 * (r & 1) + 1]);
        dz[mt][tile / 2][r] = dz_pair<T>(dy0, dy1, A, sv[mt][n / 2][r], derivative_from_y(A));
      }
    }
}
// The same for the other activations, act'(saved) through run_time_activation.cuh's call
// (kPassDerivativeCall elements per call, in dz_pair's order).
template <typename T, int WIDTH>
__device__ __forceinline__ void activation_dz(DzFrags<WIDTH>& dz,
                                              const float (&acc)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kPassTiles][4],
                                              const uint32_t (&sv)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kPassTiles / 2][4],
                                              int pass, Activation act, bool from_y) {
  using Tl = PipelineTiling<WIDTH>;
  // Element e: m-tile mt, tile pair n / 2, register r, half h (as the loops of the version above).
  constexpr int kPairs = Tl::kPassTiles / 2;
  auto at = [](int e, int& mt, int& n, int& r, int& h) {
    h = e % 2;
    r = e / 2 % 4;
    n = 2 * (e / 8 % kPairs);
    mt = e / (8 * kPairs);
  };
  float lo = 0.0f;
  derivative_run_time<kPassDerivativeCall, Tl::kMTiles * kPairs * 8>(
      act, from_y,
      [&](int e) {
        int mt, n, r, h;
        at(e, mt, n, r, h);
        const float2 v = unpack2<T>(sv[mt][n / 2][r]);
        return h == 0 ? v.x : v.y;
      },
      [&](int e, float d) {
        int mt, n, r, h;
        at(e, mt, n, r, h);
        const float dy = round_to<T>(acc[mt][n + (r >> 1)][2 * (r & 1) + h]);
        if (h == 0) {
          lo = dy * d;
        } else {
          const int tile = pass * Tl::kPassTiles + n;
          dz[mt][tile / 2][r] = pack2<T>(lo, dy * d);
        }
      });
}

// dZ of a hidden layer for one pass's 8-column tiles of dY accumulators, into dz (A fragments);
// the saved derivative is read from the stage (rows x WIDTH) in the same 16 x 16 blocks.
template <typename T, int WIDTH, Epilogue E>
__device__ __forceinline__ void hidden_dz(DzFrags<WIDTH>& dz,
                                          const float (&acc)[PipelineTiling<WIDTH>::kMTiles][PipelineTiling<WIDTH>::kPassTiles][4],
                                          int pass, uint32_t saved, int stage_stride, Activation act, bool from_y,
                                          int lane) {
  using Tl = PipelineTiling<WIDTH>;
  if constexpr (E == Epilogue::Relu) {
    (void)act, (void)from_y;
#pragma unroll
    for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
      for (int n = 0; n < Tl::kPassTiles; n += 2) {
        const int tile = pass * Tl::kPassTiles + n;  // even: tiles tile, tile + 1 = one A block
        uint32_t sv[4];
        px::ldmatrix_x4(sv, a_block_row(saved, stage_stride, mt, tile * 8, lane));
        // Register r: rows +8 when odd, the right tile when >= 2 (as the saved block's registers).
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float(&c)[4] = acc[mt][n + (r >> 1)];
          dz[mt][tile / 2][r] = relu_dz_pair<T>(c[2 * (r & 1)], c[2 * (r & 1) + 1], sv[r]);
        }
      }
  } else {
    uint32_t sv[Tl::kMTiles][Tl::kPassTiles / 2][4] = {};
    if (act != Activation::None)
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < Tl::kPassTiles; n += 2)
          px::ldmatrix_x4(sv[mt][n / 2], a_block_row(saved, stage_stride, mt, (pass * Tl::kPassTiles + n) * 8, lane));
    if (act == Activation::None) return activation_dz<T, WIDTH, Activation::None>(dz, acc, sv, pass);
    if (act == Activation::ReLU) return activation_dz<T, WIDTH, Activation::ReLU>(dz, acc, sv, pass);
    activation_dz<T, WIDTH>(dz, acc, sv, pass, act, from_y);
  }
}

// dZ of the last hidden layer: dY = dZ_out * W_out with dZ_out (rows x out_width) read from the
// buffer `dz_out` (rows of out_stride bytes), W_out (out_width x WIDTH) at w; then hidden_dz with
// the saved rows at `saved`.
template <typename T, int WIDTH, Epilogue E>
__device__ __forceinline__ void last_hidden_dz(DzFrags<WIDTH>& dz, uint32_t dz_out, int out_stride, int out_width,
                                               uint32_t w, uint32_t saved, int stage_stride, Activation act,
                                               bool from_y, int lane) {
  using Tl = PipelineTiling<WIDTH>;
  constexpr int stride = (WIDTH + kSmemPad) * 2;
#pragma unroll
  for (int pass = 0; pass < Tl::kPasses; ++pass) {
    float acc[Tl::kMTiles][Tl::kPassTiles][4] = {};
    for (int k0 = 0; k0 < out_width; k0 += 16) {
      uint32_t a[Tl::kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt) px::ldmatrix_x4(a[mt], a_block_row(dz_out, out_stride, mt, k0, lane));
#pragma unroll
      for (int p = 0; p < Tl::kPassTiles / 2; ++p) {
        uint32_t b[4];
        px::ldmatrix_x4_trans(b, bt_pair_row(w, stride, k0, (pass * Tl::kPassTiles + 2 * p) * 8, lane));
#pragma unroll
        for (int mt = 0; mt < Tl::kMTiles; ++mt) {
          mma_16816<T>(acc[mt][2 * p], a[mt], b[0], b[1]);
          mma_16816<T>(acc[mt][2 * p + 1], a[mt], b[2], b[3]);
        }
      }
    }
    hidden_dz<T, WIDTH, E>(dz, acc, pass, saved, stage_stride, act, from_y, lane);
  }
}

// dZ of hidden layer l < n_hidden - 1: dY = dZ_{l+1} (registers) * W_{l+1} (WIDTH x WIDTH at w).
template <typename T, int WIDTH, Epilogue E>
__device__ __forceinline__ void inner_hidden_dz(DzFrags<WIDTH>& dz, const DzFrags<WIDTH>& dz_above, uint32_t w,
                                                uint32_t saved, int stage_stride, Activation act, bool from_y,
                                                int lane) {
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
        px::ldmatrix_x4_trans(b, bt_pair_row(w, stride, 16 * ks, (pass * Tl::kPassTiles + 2 * p) * 8, lane));
#pragma unroll
        for (int mt = 0; mt < Tl::kMTiles; ++mt) {
          mma_16816<T>(acc[mt][2 * p], dz_above[mt][ks], b[0], b[1]);
          mma_16816<T>(acc[mt][2 * p + 1], dz_above[mt][ks], b[2], b[3]);
        }
      }
    hidden_dz<T, WIDTH, E>(dz, acc, pass, saved, stage_stride, act, from_y, lane);
  }
}

// The output layer's dZ = round(dL/doutput * out_act'(out_z)) in place: dL/doutput in columns
// 0 .. out_width - 1 of the stage, out_z beside it. An identity output's dZ is dL/doutput as is.
template <typename T, Epilogue OUT>
__device__ __forceinline__ void output_dz_in_place(uint32_t stage, int stage_stride, int out_width, Activation out_act,
                                                   int mtiles, int lane) {
  if constexpr (OUT != Epilogue::Identity) {
    if (out_act == Activation::None) return;
    for (int c0 = 0; c0 < out_width; c0 += 16)
      for (int mt = 0; mt < mtiles; ++mt) {
        uint32_t dy[4], z[4], d[4];
        px::ldmatrix_x4(dy, a_block_row(stage, stage_stride, mt, c0, lane));
        px::ldmatrix_x4(z, a_block_row(stage, stage_stride, mt, out_width + c0, lane));
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float2 f = unpack2<T>(dy[r]);
          d[r] = dz_pair<T>(f.x, f.y, out_act, z[r], false);
        }
        __syncwarp();  // every lane has read the block before it is overwritten
        put_block(stage, stage_stride, mt, c0, d, lane);
      }
    __syncwarp();
  }
}

// dL/dinput = dZ_0 * W_0 (W_0: WIDTH x in_width at w), 16 columns at a time, into the stage.
template <typename T, int WIDTH>
__device__ __forceinline__ void input_gradient(const DzFrags<WIDTH>& dz, uint32_t w, int in_width, uint32_t stage,
                                               int stage_stride, int lane) {
  using Tl = PipelineTiling<WIDTH>;
  const int stride = (in_width + kSmemPad) * 2;
  for (int c0 = 0; c0 < in_width; c0 += 16) {
    float o[Tl::kMTiles][2][4] = {};
#pragma unroll
    for (int ks = 0; ks < Tl::kKSteps; ++ks) {
      uint32_t b[4];
      px::ldmatrix_x4_trans(b, bt_pair_row(w, stride, 16 * ks, c0, lane));
#pragma unroll
      for (int mt = 0; mt < Tl::kMTiles; ++mt) {
        mma_16816<T>(o[mt][0], dz[mt][ks], b[0], b[1]);
        mma_16816<T>(o[mt][1], dz[mt][ks], b[2], b[3]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < Tl::kMTiles; ++mt) {
      const uint32_t v[4] = {pack2<T>(o[mt][0][0], o[mt][0][1]), pack2<T>(o[mt][0][2], o[mt][0][3]),
                             pack2<T>(o[mt][1][0], o[mt][1][1]), pack2<T>(o[mt][1][2], o[mt][1][3])};
      put_block(stage, stage_stride, mt, c0, v, lane);
    }
  }
}

// Where the next item to load is: tile, item k (0 .. n_hidden), ring buffer.
struct ItemCursor {
  int64_t tile;
  int k, buffer;
};

// Item 0 of the tile at row0 (dL/doutput, out_z beside it where the output activation keeps it)
// into buf; no commit.
template <typename T, int WIDTH>
__device__ __forceinline__ void load_output_item(uint32_t buf, int stride, const BackwardArgs& args,
                                                 const KernelShape& s, Activation out_act, int64_t row0, int lane) {
  using Tl = PipelineTiling<WIDTH>;
  load_tile<Tl::kRows>(buf, stride, args.dL_doutput, args.ld_dout, s.out_width, row0, args.batch, lane);
  if (out_act != Activation::None)
    load_tile<Tl::kRows>(buf + 2 * s.out_width, stride, args.out_z, s.out_width, s.out_width, row0, args.batch, lane);
}

// Item k >= 1 of the tile at row0 (hidden layer n_hidden - k's saved rows; none where the
// derivative needs none) into buf; no commit.
template <typename T, int WIDTH>
__device__ __forceinline__ void load_saved_item(uint32_t buf, int stride, const BackwardArgs& args,
                                                const KernelShape& s, Activation act, int k, int64_t row0, int lane) {
  using Tl = PipelineTiling<WIDTH>;
  if (act == Activation::None) return;
  const T* saved = static_cast<const T*>(args.hidden_deriv) + (s.n_hidden - k) * args.batch * WIDTH;
  load_tile<Tl::kRows>(buf, stride, saved, WIDTH, WIDTH, row0, args.batch, lane);
}

// Item c.k of tile c.tile into its ring buffer (nothing past the last tile), as one commit group;
// then the cursor moves on.
template <typename T, int WIDTH>
__device__ __forceinline__ void load_item(ItemCursor& c, uint32_t buffers, int buffer_bytes, int stage_stride,
                                          const BackwardArgs& args, const KernelShape& s, Activation act,
                                          Activation out_act, int64_t n_tiles, int64_t step, int lane) {
  using Tl = PipelineTiling<WIDTH>;
  if (c.tile < n_tiles) {
    const uint32_t buf = buffers + c.buffer * buffer_bytes;
    const int64_t row0 = c.tile * Tl::kRows;
    if (c.k == 0)
      load_output_item<T, WIDTH>(buf, stage_stride, args, s, out_act, row0, lane);
    else
      load_saved_item<T, WIDTH>(buf, stage_stride, args, s, act, c.k, row0, lane);
  }
  px::cp_async_commit();
  c.buffer = c.buffer == kBwdBuffers - 1 ? 0 : c.buffer + 1;
  if (++c.k > s.n_hidden) {
    c.k = 0;
    c.tile += step;
  }
}

template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, int BUFFERS>
__device__ __forceinline__ void pipelined_backward_body(KernelShape s, BackwardArgs args, int weight_bytes,
                                                     int stage_stride, int64_t n_tiles) {
  static_assert(BUFFERS == kBwdBuffers || BUFFERS == kOneBuffer, "a ring of three, or one buffer + item 0's");
  constexpr bool kRing = BUFFERS == kBwdBuffers;
  using Tl = PipelineTiling<WIDTH>;
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  const int64_t batch = args.batch, mat = batch * WIDTH;
  const int n_hidden = s.n_hidden;
  const Activation act = HIDDEN == Epilogue::Relu ? Activation::ReLU : s.act;
  const Activation out_act = OUT == Epilogue::Identity ? Activation::None : s.out_act;
  const bool from_y = HIDDEN == Epilogue::Relu || s.hidden_deriv_is_y;
  T* dz_base = static_cast<T*>(args.dz);
  // The ring's buffers all have stage_stride; the one-buffer variant's item 0 has its own.
  const int buffer_bytes = Tl::kRows * stage_stride;
  const int out_stride = kRing ? stage_stride : output_item_stride(s.out_width, out_act != Activation::None, sizeof(T));
  const int warp_bytes = BUFFERS * buffer_bytes + (kRing ? 0 : Tl::kRows * out_stride);
  const uint32_t buffers = px::shared_address(smem + weight_bytes + warp * warp_bytes);
  const uint32_t out_item = buffers + buffer_bytes;  // one-buffer variant only

  // One commit group per item (ring) or per pair of copies (one buffer); the first are in flight
  // while the weights are staged (whose wait lands them too; the loop's waits count from there).
  ItemCursor next{first, 0, 0};
  if constexpr (kRing) {
    for (int i = 0; i < kBwdBuffers - 1; ++i)
      load_item<T, WIDTH>(next, buffers, buffer_bytes, stage_stride, args, s, act, out_act, n_tiles, step, lane);
  } else {
    if (first < n_tiles) {
      load_output_item<T, WIDTH>(out_item, out_stride, args, s, out_act, first * Tl::kRows, lane);
      load_saved_item<T, WIDTH>(buffers, stage_stride, args, s, act, 1, first * Tl::kRows, lane);
    }
    px::cp_async_commit();
  }
  stage_weights_async<WIDTH>(smem, static_cast<const T*>(args.weights), s);
  const uint32_t w_base = px::shared_address(smem);

  int b = 0;  // the current item's ring buffer
  for (int64_t tile = first; tile < n_tiles; tile += step) {
    const int64_t row0 = tile * Tl::kRows;
    DzFrags<WIDTH> dz;  // dZ of the layer above the current one (A fragments)
    for (int k = 0; k <= n_hidden; ++k) {
      const uint32_t buf = kRing ? buffers + b * buffer_bytes : buffers;
      // Item 0's buffer: this one (k == 0) or the one before it (k == 1) in the ring.
      const uint32_t out_buf =
          kRing ? (k == 0 ? buf : buffers + (b == 0 ? kBwdBuffers - 1 : b - 1) * buffer_bytes) : out_item;
      px::cp_async_wait<kRing ? kBwdBuffers - 2 : 0>();  // this item's copies (this lane's) have landed
      __syncwarp();                                       // ... and every lane's
      if (k == 0) {
        output_dz_in_place<T, OUT>(out_buf, out_stride, s.out_width, out_act, Tl::kMTiles, lane);
        if (dz_base)
          store_tile<Tl::kRows, false>(out_buf, out_stride, dz_base + n_hidden * mat, s.out_width, s.out_width, row0,
                                       batch, lane);
      } else {
        const int l = n_hidden - k;
        DzFrags<WIDTH> d;
        if (k == 1) {
          last_hidden_dz<T, WIDTH, HIDDEN>(
              d, out_buf, out_stride, s.out_width,
              w_base + 2 * static_cast<uint32_t>(layer_smem_offset(WIDTH, s, n_hidden)), buf, stage_stride, act,
              from_y, lane);
        } else {
          inner_hidden_dz<T, WIDTH, HIDDEN>(
              d, dz, w_base + 2 * static_cast<uint32_t>(layer_smem_offset(WIDTH, s, l + 1)), buf, stage_stride, act,
              from_y, lane);
        }
        copy_fragments<WIDTH>(dz, d);
        __syncwarp();  // every lane has read the saved rows before the buffer takes dZ
        if (dz_base) {
          put_fragments<WIDTH>(buf, stage_stride, dz, lane);
          __syncwarp();
          store_tile<Tl::kRows, false>(buf, stage_stride, dz_base + l * mat, WIDTH, WIDTH, row0, batch, lane);
          __syncwarp();
        }
        if (l == 0 && args.dL_dinput) {
          input_gradient<T, WIDTH>(dz, w_base, s.in_width, buf, stage_stride, lane);
          __syncwarp();
          store_tile<Tl::kRows, true>(buf, stage_stride, args.dL_dinput, args.ld_din, s.in_width, row0, batch, lane);
        }
      }
      __syncwarp();  // the buffers the next copies land in are read out
      if constexpr (kRing) {
        load_item<T, WIDTH>(next, buffers, buffer_bytes, stage_stride, args, s, act, out_act, n_tiles, step, lane);
        b = b == kBwdBuffers - 1 ? 0 : b + 1;
      } else if (k >= 1) {
        // Item 0's buffer is free once item 1 has read it: the next tile's item 0 goes in; the
        // saved rows' buffer takes the next item (this tile's, or the next tile's item 1).
        const int64_t after = tile + step;
        if (k == 1 && after < n_tiles)
          load_output_item<T, WIDTH>(out_item, out_stride, args, s, out_act, after * Tl::kRows, lane);
        if (k < n_hidden)
          load_saved_item<T, WIDTH>(buffers, stage_stride, args, s, act, k + 1, row0, lane);
        else if (after < n_tiles)
          load_saved_item<T, WIDTH>(buffers, stage_stride, args, s, act, 1, after * Tl::kRows, lane);
        px::cp_async_commit();
      }
    }
  }
  px::cp_async_wait<0>();
}

template <typename T, int WIDTH, Epilogue HIDDEN, Epilogue OUT, int BUFFERS>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize, PipelineTiling<WIDTH>::kMinBlocksPerSm)
    pipelined_backward_kernel(KernelShape s, BackwardArgs args, int weight_bytes, int stage_stride, int64_t n_tiles) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (__CUDA_ARCH__ < kPipelinedBackwardMinArch)
    __trap();  // never launched: launch_pipelined_backward checks the architecture first
  else
    pipelined_backward_body<T, WIDTH, HIDDEN, OUT, BUFFERS>(s, args, weight_bytes, stage_stride, n_tiles);
#else
  __trap();  // never launched: launch_pipelined_backward checks the architecture first
#endif
}

}  // namespace

}  // namespace tinyfuse::cuda::fused
