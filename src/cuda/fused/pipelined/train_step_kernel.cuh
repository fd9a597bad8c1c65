// FullyFusedMLP's whole training pass in one kernel (CUDA, sm_90+): the pipelined training forward
// with the L2, RelativeL2 or L1 loss folded in (pipelined/forward_kernel.cuh, loss_epilogue.cuh)
// and the backward that forms the weight gradients inside (pipelined/backward_weight_grads_kernel.cuh),
// one round of tiles after the other, on chip; dL/dinput too where asked (an encoding before the
// network). For 64 wide, ReLU hidden layers, input 32 or 64 wide, an identity output at most 64
// wide or another output activation (OUT = Epilogue::Generic) at most 32 wide, 1 or 2 hidden layers
// (the shapes the two kernels it joins take; 3 hidden layers would need a sixth buffer per warp,
// which shared memory does not hold). With an output activation the output layer leaves z beside
// the activated output in the warp's output buffer, the loss turns the output into dL/doutput in
// place, and dZ of the output layer replaces it there (output_dz_in_place, as the backward forms
// it from the z the training forward keeps: the same bits).
//
// Why: run as three kernels, the pass writes every hidden layer's y and dL/doutput and reads them
// back (1,284 B per sample at 64 -> 64 x 2 -> 64 with the loss folded); here only the input and
// the FP32 target come in and one loss value per row goes out (388 B), so DRAM no longer bounds
// the pass: with eight warps per SM (255 registers, 220 KB of shared memory) it is bound by
// instruction issue and latency, hence the work kept off the per-element path (docs/PERFORMANCE.md).
//
// How: the block's kDwWarps warps run in lockstep, one round of kDwWarps tiles (one per warp) at a
// time. Per warp, shared memory holds (`buffer(i)`): the round's input tile and the next round's
// (in flight from the round's start), each hidden layer's y, and the output tile. The forward runs
// warp by warp as the pipelined forward does (same helpers, same bits): y_l into its buffer, the
// output into the output buffer, where the loss epilogue turns it into dL/doutput in place. Then,
// behind a barrier each, the backward walks the layers down as the weight-gradient backward does:
// every warp adds its slice of dW_L over all the round's tiles (dZ_L and the layer's input read
// from every warp's buffers) and forms dZ of the layer below from its own tile, which replaces
// that layer's y once every warp has read it. The dW slices stay in registers across rounds (16
// FP32 per layer and lane), added round by round in the weight-gradient backward's order, so the
// partials equal that kernel's bit for bit on the same grid.
#pragma once

#include "cuda/fused/pipelined/backward_weight_grads_kernel.cuh"

namespace tinyfuse::cuda::fused {

namespace {

constexpr int kTrainMaxHidden = 2;
constexpr int kTrainMinArch = 900;  // built and launched for sm_90+ (the folded loss's arch)
constexpr int kTrainSumBytes = PipelineTiling<kDwWidth>::kRows * 8 * 4;  // a warp's loss group sums
constexpr int kTrainStageStride = (kDwWidth + kSmemPad) * 2;           // bytes per buffer row (64 wide + pad)

// Per-warp buffers: 0 and 1 the inputs (this round's and the next's, alternating), 2 + l hidden
// layer l's y (then its dZ), the last the output (then dL/doutput).
__host__ __device__ constexpr int train_buffers(int n_hidden) { return n_hidden + 3; }

// Rows [row0, row0 + ROWS) of a (batch x 8 CHUNKS) matrix into a buffer, 16 bytes per cp.async;
// rows past the batch become zeros. load_tile's job with the lane's row and chunk fixed at
// compile time (CHUNKS divides the warp): no division, one address add per copy.
template <int ROWS, int CHUNKS>
__device__ __forceinline__ void load_rows(uint32_t buf, int stage_stride, const void* in, int64_t ld, int64_t row0,
                                          int64_t batch, int lane) {
  static_assert(kWarpSize % CHUNKS == 0, "a row's chunks must divide the warp");
  constexpr int kStep = kWarpSize / CHUNKS;  // rows per pass of the warp
  const int r = lane / CHUNKS, c = lane % CHUNKS;
  const int64_t left = batch - row0;                           // >= 1: the tile starts inside the batch
  const int rows = left < ROWS ? static_cast<int>(left) : ROWS;  // of the tile's
  const uint16_t* src = static_cast<const uint16_t*>(in) + (row0 + r) * ld + c * 8;
  const int64_t step = kStep * ld;
  const uint32_t dst = buf + r * stage_stride + c * 16;
#pragma unroll
  for (int i = 0; i < ROWS / kStep; ++i) {
    const bool valid = r + i * kStep < rows;
    px::cp_async_16(dst + i * kStep * stage_stride, valid ? src : in, valid ? 16u : 0u);
    src += step;
  }
}

// dW_L's slice of this warp, over the round: dz_b holds dZ_L, x_b the layer's input.
template <typename T>
__device__ __forceinline__ void train_dw_step(float (&dw)[4][4], const KernelShape& s, int L, uint32_t all_buffers,
                                              int warp_stride, int buffer_bytes, int stage_stride, int dz_b, int x_b,
                                              int sources, int warp, int lane) {
  const int out_l = layer_out(kDwWidth, s, L), in_l = layer_in(kDwWidth, s, L);
  const int m0 = (warp >> 1) * 16, n0 = (warp & 1) * (in_l / 2), n_tiles8 = in_l / 16;
  if (m0 >= out_l) return;
  float acc[4][4] = {};
  dw_round_products<T>(acc, all_buffers, warp_stride, buffer_bytes, stage_stride, dz_b, x_b, sources, m0, n0, n_tiles8,
                       lane);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (j >= n_tiles8) break;
#pragma unroll
    for (int i = 0; i < 4; ++i) dw[j][i] += acc[j][i];  // the other kernel's order: old + round
  }
}

template <typename T, int H, int IN, int OUT, Epilogue OUT_E>
__device__ __forceinline__ void train_step_body(KernelShape s, ForwardArgs args, int weight_bytes, int64_t n_tiles,
                                                float* partial) {
  using Tl = PipelineTiling<kDwWidth>;
  // The widths as constants (the launcher picked this instantiation by them): loops over columns
  // unroll and every weight offset folds.
  s.in_width = IN;
  s.out_width = OUT;
  constexpr int kBuffers = train_buffers(H), kOut = kBuffers - 1;
  constexpr int stage_stride = kTrainStageStride;  // a constant: the buffers' addresses fold into immediates
  extern __shared__ uint4 smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_raw);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  constexpr int buffer_bytes = Tl::kRows * stage_stride, warp_stride = kBuffers * buffer_bytes;
  const uint32_t all_buffers = px::shared_address(smem + weight_bytes);
  const uint32_t buffers = all_buffers + warp * warp_stride;
  const uint32_t sums = all_buffers + kDwWarps * warp_stride + warp * kTrainSumBytes;
  const auto buffer = [&](int i) { return buffers + i * buffer_bytes; };
  const int64_t batch = args.batch, step = static_cast<int64_t>(gridDim.x) * kDwWarps;
  const int64_t first0 = static_cast<int64_t>(blockIdx.x) * kDwWarps;

  float dw[H + 1][4][4];
#pragma unroll
  for (int L = 0; L <= H; ++L)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) dw[L][j][i] = 0.0f;

  if (first0 + warp < n_tiles)
    load_rows<Tl::kRows, IN / 8>(buffer(0), stage_stride, args.input, args.ld_in, (first0 + warp) * Tl::kRows, batch, lane);
  px::cp_async_commit();
  stage_weights_async<kDwWidth>(smem, static_cast<const T*>(args.weights), s);  // lands the tile too; syncs
  const uint32_t w_base = px::shared_address(smem);
  const auto weights_of = [&](int l) { return w_base + 2 * static_cast<uint32_t>(layer_smem_offset(kDwWidth, s, l)); };

  int xb = 0;  // this round's input buffer
  for (int64_t first = first0; first < n_tiles; first += step) {
    const int64_t tile = first + warp, row0 = tile * Tl::kRows;
    const bool has_tile = tile < n_tiles;  // warp-uniform; a warp without one still takes part
    const int sources = static_cast<int>(n_tiles - first < kDwWarps ? n_tiles - first : kDwWarps);
    // The next round's input into the other input buffer (read last by the round before's dW_0,
    // behind that round's closing barrier): a round ahead.
    if (tile + step < n_tiles)
      load_rows<Tl::kRows, IN / 8>(buffer(xb ^ 1), stage_stride, args.input, args.ld_in, (tile + step) * Tl::kRows, batch,
                                   lane);
    px::cp_async_commit();
    if (has_tile) prefetch_target<Tl::kRows>(args.loss, row0, batch, lane);
    px::cp_async_wait<1>();  // this round's input (this lane's copies) has landed ...
    __syncwarp();            // ... and every lane's

    if (has_tile) {  // forward and loss: this warp's tile alone
      uint32_t h[Tl::kMTiles][Tl::kKSteps][4];
      FirstZ<kDwWidth> unused_z;
      first_layer<T, kDwWidth, Epilogue::Relu, false>(h, buffer(xb), stage_stride, s.in_width, w_base,
                                                      Activation::ReLU, lane, false, unused_z);
      put_fragments<kDwWidth>(buffer(2), stage_stride, h, lane);
#pragma unroll
      for (int l = 1; l < H; ++l) {
        uint32_t a[Tl::kMTiles][Tl::kKSteps][4];
        hidden_layer<T, kDwWidth, Epilogue::Relu, false>(a, h, weights_of(l), Activation::ReLU, lane, false, 0u,
                                                         stage_stride);
        copy_fragments<kDwWidth>(h, a);
        put_fragments<kDwWidth>(buffer(2 + l), stage_stride, h, lane);
      }
      if constexpr (OUT_E == Epilogue::Identity)
        output_layer<T, kDwWidth, Epilogue::Identity, false>(h, weights_of(H), s.out_width, buffer(kOut), stage_stride,
                                                             Activation::None, lane, false);
      else  // the activated output, z beside it (columns out_width .. 2 out_width - 1)
        output_layer<T, kDwWidth, Epilogue::Generic, true>(h, weights_of(H), s.out_width, buffer(kOut), stage_stride,
                                                           s.out_act, lane, true);
      __syncwarp();
      loss_epilogue_of_kind<T, Tl::kRows, ChunkWalk, true>(buffer(kOut), stage_stride, s.out_width, args.loss, row0,
                                                           batch, lane, sums);
      if constexpr (OUT_E != Epilogue::Identity) {
        __syncwarp();  // every lane's dL/doutput is in place
        output_dz_in_place<T, OUT_E>(buffer(kOut), stage_stride, s.out_width, s.out_act, Tl::kMTiles, lane);
      }
    }

    // Backward, layer H (the output layer) down to 0.
    DzFrags<kDwWidth> dz;
    __syncthreads();  // every warp's dL/doutput and y are in place
    train_dw_step<T>(dw[H], s, H, all_buffers, warp_stride, buffer_bytes, stage_stride, kOut, 2 + H - 1, sources, warp,
                     lane);
    if (has_tile)
      last_hidden_dz<T, kDwWidth, Epilogue::Relu>(dz, buffer(kOut), stage_stride, s.out_width, weights_of(H),
                                                  buffer(2 + H - 1), stage_stride, Activation::ReLU, true, lane);
    __syncthreads();  // every warp has read dL/doutput and y_{H-1}
    if (has_tile) put_fragments<kDwWidth>(buffer(2 + H - 1), stage_stride, dz, lane);  // dZ_{H-1}
#pragma unroll
    for (int L = H - 1; L >= 1; --L) {
      __syncthreads();  // every warp's dZ_L is in place
      train_dw_step<T>(dw[L], s, L, all_buffers, warp_stride, buffer_bytes, stage_stride, 2 + L, 2 + L - 1, sources,
                       warp, lane);
      DzFrags<kDwWidth> below;
      if (has_tile)
        inner_hidden_dz<T, kDwWidth, Epilogue::Relu>(below, dz, weights_of(L), buffer(2 + L - 1), stage_stride,
                                                     Activation::ReLU, true, lane);
      __syncthreads();  // every warp has read dZ_L and y_{L-1}
      if (has_tile) {
        copy_fragments<kDwWidth>(dz, below);
        put_fragments<kDwWidth>(buffer(2 + L - 1), stage_stride, dz, lane);  // dZ_{L-1}
      }
    }
    __syncthreads();  // every warp's dZ_0 is in place
    train_dw_step<T>(dw[0], s, 0, all_buffers, warp_stride, buffer_bytes, stage_stride, 2, xb, sources, warp, lane);
    __syncthreads();  // the round's buffers are free for the next
    if (has_tile && args.dL_dinput) {
      // dL/dinput = dZ_0 W_0 (pipelined/backward_kernel.cuh's input_gradient, the same bits as the
      // backward's): dZ_0 is still in this warp's registers; out through its own y_0 buffer, which
      // the next round's forward writes only after this warp's reads (the __syncwarp below).
      input_gradient<T, kDwWidth>(dz, weights_of(0), IN, buffer(2), stage_stride, lane);
      __syncwarp();
      store_tile<Tl::kRows, true>(buffer(2), stage_stride, args.dL_dinput, args.ld_din, IN, row0, batch, lane);
      __syncwarp();
    }
    xb ^= 1;
  }
  px::cp_async_wait<0>();

  // This warp's slices, as the weight-gradient backward writes its block's dW: layer L's chunk blockIdx.x.
  const int g = lane >> 2, t = lane & 3, m0 = (warp >> 1) * 16;
  int64_t elem_begin = 0;
#pragma unroll
  for (int L = 0; L <= H; ++L) {
    const int out_l = layer_out(kDwWidth, s, L), in_l = layer_in(kDwWidth, s, L);
    const int n0 = (warp & 1) * (in_l / 2), n_tiles8 = in_l / 16;
    const int64_t elems = static_cast<int64_t>(out_l) * in_l;
    float* dst = partial + static_cast<int64_t>(gridDim.x) * elem_begin + blockIdx.x * elems;
    if (m0 < out_l) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j >= n_tiles8) break;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
          *reinterpret_cast<float2*>(dst + (m0 + g + 8 * hh) * in_l + n0 + 8 * j + 2 * t) =
              make_float2(dw[L][j][2 * hh], dw[L][j][2 * hh + 1]);
      }
    }
    elem_begin += elems;
  }
}

template <typename T, int H, int IN, int OUT, Epilogue OUT_E>
__global__ void __launch_bounds__(kDwWarps* kWarpSize, 1)
    pipelined_train_step_kernel(KernelShape s, ForwardArgs args, int weight_bytes, int64_t n_tiles, float* partial) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (__CUDA_ARCH__ < kTrainMinArch)
    __trap();  // never launched: the launcher checks the architecture first
  else
    train_step_body<T, H, IN, OUT, OUT_E>(s, args, weight_bytes, n_tiles, partial);
#else
  __trap();  // never launched: the launcher checks the architecture first
#endif
}

}  // namespace

}  // namespace tinyfuse::cuda::fused
