// FullyFusedMLP's pipelined backward with the weight gradients formed inside it (CUDA, sm_80+),
// for the shape that training benchmarks and most fields use: 64 wide, ReLU hidden layers, input 32
// or 64 wide, up to 3 hidden layers, an identity output at most 64 wide or another output
// activation (OUT = Epilogue::Generic: a NeRF colour network's Sigmoid) at most 32 wide, its z
// loaded beside dL/doutput; dL/dinput too where asked (an encoding before the network:
// NetworkWithInputEncoding's grid).
//
// Why: the plain pipelined backward writes every layer's dZ (128 B per sample and layer) and the
// weight-gradient kernels (weight_grad.cu) read each dZ back beside the layer's input; that is
// about 1.1 KB per sample of the 2.6 KB a 64-wide training step moves. Here dW = dZ^T X is summed
// while both are in shared memory anyway, and only one 64 x 64 FP32 partial per layer and block
// leaves the kernel; weight_grad.cu's reduction adds the blocks' partials in a fixed order.
//
// How: dZ and dL/doutput are formed exactly as pipelined/backward_kernel.cuh forms them (its helpers,
// the same bits). The block's kDwWarps warps run their tiles in lockstep, one item (a layer's
// rows) at a time, so each warp can read every warp's buffers: when item k lands the input rows
// of layer L = n_hidden + 1 - k (a hidden layer's saved y, or the network's input for layer 0),
// every warp adds its slice of dW_L (16 output rows x half the input columns: 16 FP32
// accumulators per lane) over all the block's tiles from dZ_L (the previous item's buffer, where
// it was put) and those rows, both read with ldmatrix .trans as weight_grad.cu reads them; the
// slice is then added into the block's FP32 dW in shared memory, which the warp alone touches.
// dL/dinput = dZ_0 W_0 (pipelined/backward_kernel.cuh's input_gradient, the same bits) is formed
// once the input rows' item has served dW_0: dZ_0 is still in the warp's registers, and the warp
// writes the result through its own buffer of that item, which no warp reads again before the
// warp's next load into it.
// Items per tile: dL/doutput, the saved y of hidden layers n_hidden - 1 .. 0, the input rows,
// through pipelined/backward_kernel.cuh's ring of three per-warp buffers (one item ahead). A ring of
// four (two ahead; the dW rows then unpadded to fit) measured slower on the H200: 386 against
// 350 us for 2^20 rows at 64 -> 64 x 2 -> 64 (docs/PERFORMANCE.md).
//
// Summation order: per block, rounds in order, within a round the tiles in warp order, 16 rows per
// mma: fixed by the batch and the grid, so the result is bitwise repeatable; it is not
// weight_grad.cu's order, so the gradients equal the separate kernels' to FP32 rounding
// (FusedWeightGrads.* in tests/gpu/test_fused_stream_forward.cpp).
#pragma once

#include "cuda/fused/pipelined/backward_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

constexpr int kDwWarps = 8;            // warps per block: 4 output-row blocks x 2 input-column halves
constexpr int kDwWidth = 64;           // the hidden width this kernel takes
constexpr int kDwMaxLayers = 4;        // n_hidden <= 3
constexpr int kDwStride = kDwWidth + 8;  // floats per row of a layer's dW in shared memory (bank spread)
constexpr int kDwLayerFloats = kDwWidth * kDwStride;

// The widest output the kernel takes: 64, or 32 with an output activation, whose z sits beside
// dL/doutput in a buffer row of 64 columns.
inline int dw_max_out_width(Activation out_act) { return out_act == Activation::None ? kDwWidth : kDwWidth / 2; }

// Floats of one block's partial: every layer's dW (out x in), back to back.
inline size_t dw_partial_floats(const KernelShape& s) {
  size_t floats = 0;
  for (int l = 0; l <= s.n_hidden; ++l) floats += static_cast<size_t>(layer_out(kDwWidth, s, l)) * layer_in(kDwWidth, s, l);
  return floats;
}

// Where the next item to load is (tile, item 0 .. n_hidden + 1, ring buffer); as ItemCursor.
// Item 0 is dL/doutput with, for an output activation (out_act not None), its z beside it.
template <typename T>
__device__ __forceinline__ void load_dw_item(ItemCursor& c, uint32_t buffers, int buffer_bytes, int stage_stride,
                                             const BackwardArgs& args, const KernelShape& s, Activation out_act,
                                             int64_t n_tiles, int64_t step, int lane) {
  constexpr int kRows = PipelineTiling<kDwWidth>::kRows;
  if (c.tile < n_tiles) {
    const uint32_t buf = buffers + c.buffer * buffer_bytes;
    const int64_t row0 = c.tile * kRows;
    if (c.k == 0) {
      load_output_item<T, kDwWidth>(buf, stage_stride, args, s, out_act, row0, lane);
    } else if (c.k <= s.n_hidden) {
      const T* saved = static_cast<const T*>(args.hidden_deriv) + (s.n_hidden - c.k) * args.batch * kDwWidth;
      load_tile<kRows>(buf, stage_stride, saved, kDwWidth, kDwWidth, row0, args.batch, lane);
    } else {
      load_tile<kRows>(buf, stage_stride, args.input, args.ld_in, s.in_width, row0, args.batch, lane);
    }
  }
  px::cp_async_commit();
  c.buffer = c.buffer == kBwdBuffers - 1 ? 0 : c.buffer + 1;
  if (++c.k > s.n_hidden + 1) {
    c.k = 0;
    c.tile += step;
  }
}

// One source warp's share of this warp's dW_L slice: its dZ_L (rows x out) at dz, the layer's
// input (rows x in) at x. acc: the m16n8 accumulators of the slice's up to four 8-column tiles.
template <typename T>
__device__ __forceinline__ void dw_source_products(float (&acc)[4][4], uint32_t dz, uint32_t x, int stage_stride, int m0,
                                                   int n0, int n_tiles8, int lane) {
  constexpr int kRows = PipelineTiling<kDwWidth>::kRows;
  const int q = lane >> 3, r8 = lane & 7;
#pragma unroll
  for (int ks = 0; ks < kRows / 16; ++ks) {
    uint32_t a[4];  // dZ^T: 16 output rows x 16 batch rows
    px::ldmatrix_x4_trans(a, dz + (16 * ks + (q >> 1) * 8 + r8) * stage_stride + (m0 + (q & 1) * 8) * 2);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      if (2 * j >= n_tiles8) break;
      uint32_t b[4];  // X: 16 batch rows x 16 input columns
      px::ldmatrix_x4_trans(b, x + (16 * ks + (q & 1) * 8 + r8) * stage_stride + (n0 + 16 * j + (q >> 1) * 8) * 2);
      mma_16816<T>(acc[2 * j], a, b[0], b[1]);
      mma_16816<T>(acc[2 * j + 1], a, b[2], b[3]);
    }
  }
}

// This warp's slice of dW_L over the round's tiles: `sources` warps' buffers (warp v's at
// buffers + v * warp_stride), dZ_L in buffer dz_b, the layer's input in buffer x_b; the sources
// in warp order. A full round (every warp with a tile) is unrolled, so that its loads can be
// issued ahead of the products.
template <typename T>
__device__ __forceinline__ void dw_round_products(float (&acc)[4][4], uint32_t buffers, int warp_stride,
                                                  int buffer_bytes, int stage_stride, int dz_b, int x_b, int sources,
                                                  int m0, int n0, int n_tiles8, int lane) {
  const uint32_t dz = buffers + dz_b * buffer_bytes, x = buffers + x_b * buffer_bytes;
  if (sources == kDwWarps) {
#pragma unroll
    for (int v = 0; v < kDwWarps; ++v)
      dw_source_products<T>(acc, dz + v * warp_stride, x + v * warp_stride, stage_stride, m0, n0, n_tiles8, lane);
  } else {
    for (int v = 0; v < sources; ++v)
      dw_source_products<T>(acc, dz + v * warp_stride, x + v * warp_stride, stage_stride, m0, n0, n_tiles8, lane);
  }
}

template <typename T, Epilogue OUT>
__device__ __forceinline__ void pipelined_backward_dw_body(KernelShape s, BackwardArgs args, int weight_bytes,
                                                        int stage_stride, int64_t n_tiles, float* partial) {
  using Tl = PipelineTiling<kDwWidth>;
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int buffer_bytes = Tl::kRows * stage_stride;
  const uint32_t all_buffers = px::shared_address(smem + weight_bytes);
  const uint32_t buffers = all_buffers + warp * kBwdBuffers * buffer_bytes;
  float* dw = reinterpret_cast<float*>(smem + weight_bytes + kDwWarps * kBwdBuffers * buffer_bytes);
  const int n_hidden = s.n_hidden, n_layers = n_hidden + 1;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kDwWarps;
  const Activation out_act = OUT == Epilogue::Identity ? Activation::None : s.out_act;

  for (int i = threadIdx.x; i < n_layers * kDwLayerFloats; i += blockDim.x) dw[i] = 0.0f;
  ItemCursor next{static_cast<int64_t>(blockIdx.x) * kDwWarps + warp, 0, 0};
  for (int i = 0; i < kBwdBuffers - 1; ++i)
    load_dw_item<T>(next, buffers, buffer_bytes, stage_stride, args, s, out_act, n_tiles, step, lane);
  stage_weights_async<kDwWidth>(smem, static_cast<const T*>(args.weights), s);  // and syncs the block
  const uint32_t w_base = px::shared_address(smem);

  // This warp's slice of every dW: output rows m0 .. m0 + 15, input columns n0 .. n0 + in / 2 - 1.
  const int m0 = (warp >> 1) * 16, g = lane >> 2, t = lane & 3;
  int b = 0;  // the current item's buffer (the same index in every warp: lockstep)
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kDwWarps; first < n_tiles; first += step) {
    const int64_t tile = first + warp;
    const bool has_tile = tile < n_tiles;  // warp-uniform; a warp without one still takes part
    const int sources = static_cast<int>(n_tiles - first < kDwWarps ? n_tiles - first : kDwWarps);
    DzFrags<kDwWidth> dz;  // dZ of the layer above the current one (A fragments)
    for (int k = 0; k <= n_hidden + 1; ++k) {
      const uint32_t buf = buffers + b * buffer_bytes;
      const int prev = b == 0 ? kBwdBuffers - 1 : b - 1;
      px::cp_async_wait<kBwdBuffers - 2>();  // this item's copies (this lane's) have landed ...
      __syncthreads();  // ... every lane's in every warp, and every warp's dZ of the item before is put
      if (k == 0 && has_tile) {
        // dZ of the output layer in place of dL/doutput (nothing to do for an identity output);
        // the other warps read it behind the next item's barrier.
        output_dz_in_place<T, OUT>(buf, stage_stride, s.out_width, out_act, Tl::kMTiles, lane);
      }
      if (k >= 1) {  // dW of layer L = n_hidden + 1 - k: dZ_L in the previous buffers, its input in these
        const int L = n_hidden + 1 - k;
        const int out_l = layer_out(kDwWidth, s, L), in_l = layer_in(kDwWidth, s, L);
        const int n0 = (warp & 1) * (in_l / 2), n_tiles8 = in_l / 16;
        if (m0 < out_l) {
          float acc[4][4] = {};
          dw_round_products<T>(acc, all_buffers, kBwdBuffers * buffer_bytes, buffer_bytes, stage_stride, prev, b, sources,
                                  m0, n0, n_tiles8, lane);
          float* slice = dw + L * kDwLayerFloats;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (j >= n_tiles8) break;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              float2* at = reinterpret_cast<float2*>(slice + (m0 + g + 8 * h) * kDwStride + n0 + 8 * j + 2 * t);
              const float2 old = *at;
              *at = make_float2(old.x + acc[j][2 * h], old.y + acc[j][2 * h + 1]);
            }
          }
        }
      }
      DzFrags<kDwWidth> d;
      const bool hidden_item = k >= 1 && k <= n_hidden;
      if (hidden_item && has_tile) {  // dZ of hidden layer n_hidden - k, from its saved y in this buffer
        if (k == 1)
          last_hidden_dz<T, kDwWidth, Epilogue::Relu>(
              d, buffers + prev * buffer_bytes, stage_stride, s.out_width,
              w_base + 2 * static_cast<uint32_t>(layer_smem_offset(kDwWidth, s, n_hidden)), buf, stage_stride,
              Activation::ReLU, true, lane);
        else
          inner_hidden_dz<T, kDwWidth, Epilogue::Relu>(
              d, dz, w_base + 2 * static_cast<uint32_t>(layer_smem_offset(kDwWidth, s, n_hidden + 1 - k)), buf,
              stage_stride, Activation::ReLU, true, lane);
      }
      __syncthreads();  // every warp is done reading these buffers and the previous ones
      if (hidden_item && has_tile) {
        copy_fragments<kDwWidth>(dz, d);
        put_fragments<kDwWidth>(buf, stage_stride, dz, lane);  // dZ for the next item's dW
      }
      if (k == n_hidden + 1 && has_tile && args.dL_dinput) {  // dz holds dZ_0; buf the input rows, read out
        input_gradient<T, kDwWidth>(dz, w_base, s.in_width, buf, stage_stride, lane);
        __syncwarp();
        store_tile<PipelineTiling<kDwWidth>::kRows, true>(buf, stage_stride, args.dL_dinput, args.ld_din, s.in_width,
                                                         tile * PipelineTiling<kDwWidth>::kRows, args.batch, lane);
        __syncwarp();  // read out before the warp's next copy into this buffer
      }
      load_dw_item<T>(next, buffers, buffer_bytes, stage_stride, args, s, out_act, n_tiles, step, lane);
      b = b == kBwdBuffers - 1 ? 0 : b + 1;
    }
  }
  px::cp_async_wait<0>();
  __syncthreads();

  // The block's dW of every layer, as weight_grad.cu's partials: layer L's chunk blockIdx.x.
  int64_t elem_begin = 0;
  for (int L = 0; L < n_layers; ++L) {
    const int out_l = layer_out(kDwWidth, s, L), in_l = layer_in(kDwWidth, s, L);
    const int64_t elems = static_cast<int64_t>(out_l) * in_l;
    float* dst = partial + static_cast<int64_t>(gridDim.x) * elem_begin + blockIdx.x * elems;
    for (int i = threadIdx.x; i < elems; i += blockDim.x) dst[i] = dw[L * kDwLayerFloats + (i / in_l) * kDwStride + i % in_l];
    elem_begin += elems;
  }
}

// The kernels themselves are defined in backward_weight_grads.cu, the one unit that launches them
// (train_step.cu includes this header for its helpers and would otherwise compile a copy of each).

}  // namespace

}  // namespace tinyfuse::cuda::fused
