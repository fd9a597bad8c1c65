// FullyFusedMLP's backward kernel on AMD GPUs (matrix-core builtins: primitives/amd_matrix_ops.cuh),
// included by backward.cu in HIP builds.
//
// The structure of the CUDA kernel (backward.cu): blocks of kWarpsPerBlock waves loop over tiles
// of kBlockRows batch rows; each wave owns Tiling<WIDTH>::kRows rows from dL/doutput back to
// dL/dinput; weights resident in LDS or staged one layer at a time (kernel_common.cuh, the
// forward's layout); every value rounded where launch.h says (dY of a hidden layer = round(FP32
// product), dZ = round(dY * act'), dL/dinput = round(FP32 product)). What differs, as in the
// forward (forward_hip.cuh): an AMD accumulator's layout is not the next product's A layout, so dZ
// does not stay in registers as the next product's A operand. Each wave keeps its rows' dZ in an
// LDS buffer instead: the output layer's dZ is built there 16 columns at a time; a hidden layer's
// epilogue writes dY from the accumulators' registers over the buffer (last read by the product
// that made those accumulators), then turns it into dZ in place in memory order. The weights are
// the B operand as stored (k = the layer's output rows): product_untransposed. LDS per block: the
// weights, then per wave kRows dZ rows (WIDTH + kSmemPad wide).
#pragma once

#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/general/wmma_layers_hip.cuh"

namespace tinyfuse::cuda::fused {

// Row stride (elements) of a wave's dZ buffer: hidden dZ is WIDTH wide, the output layer's is
// built 16 columns at a time in its first columns. LDS bytes per wave.
template <int WIDTH>
constexpr int kHipDzLd = WIDTH + kSmemPad;
template <int WIDTH>
size_t hip_backward_wave_bytes(size_t elem_bytes) {
  return wave_lds_bytes(Tiling<WIDTH>::kRows, kHipDzLd<WIDTH>, elem_bytes);
}

template <typename T, int WIDTH>
__global__ void __launch_bounds__(kWarpsPerBlock* kMaxWarpSize)
    fused_backward_kernel(KernelShape s, BackwardArgs args, int64_t n_tiles, size_t weight_lds_bytes) {
  using Tl = Tiling<WIDTH>;
  constexpr int MT = Tl::kMTiles, NB = WIDTH / kFrag, ld = kHipDzLd<WIDTH>, stride = WIDTH + kSmemPad;
  extern __shared__ uint4 smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const T* weights = static_cast<const T*>(args.weights);
  const int warp = wave_index(), lane = wave_lane();
  const int64_t batch = args.batch;
  const int64_t mat = batch * WIDTH;  // elements of one hidden layer's dense matrix
  const size_t wave_bytes = wave_lds_bytes(Tl::kRows, ld, sizeof(T));
  unsigned char* wave_lds = reinterpret_cast<unsigned char*>(smem_raw) + weight_lds_bytes + warp * wave_bytes;
  T* dz_rows = reinterpret_cast<T*>(wave_lds);
  T* dz_base = static_cast<T*>(args.dz);
  const T* dout = static_cast<const T*>(args.dL_doutput);
  const T* out_z = static_cast<const T*>(args.out_z);
  if (s.resident) stage_all_layers<WIDTH>(smem, weights, s);

  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int64_t row0 = tile * Tl::kBlockRows + static_cast<int64_t>(warp) * Tl::kRows;
    FragAcc acc[MT][NB];

    // Output layer: dZ = dL/doutput * act'(z), 16 columns at a time into the buffer's first 16
    // columns (zeros past the batch), each chunk straight into dY of the last hidden layer.
    if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, s.n_hidden);
    {
      const T* w = smem + layer_smem_offset(WIDTH, s, s.n_hidden);
      T* dz_out = dz_base ? dz_base + s.n_hidden * mat : nullptr;
      zero(acc);
      for (int k0 = 0; k0 < s.out_width; k0 += kFrag) {
        for (int i = lane; i < Tl::kRows * kFrag; i += kWarpSize) {
          const int r = i / kFrag, c = i % kFrag;
          const int64_t row = row0 + r;
          T d = from_float<T>(0.0f);
          if (row < batch) {
            const T dy = dout[row * args.ld_dout + k0 + c];
            d = s.out_act == Activation::None
                    ? dy
                    : from_float<T>(to_float(dy) *
                                    derivative_from_saved(s.out_act, to_float(out_z[row * s.out_width + k0 + c]), false));
            if (dz_out) dz_out[row * s.out_width + k0 + c] = d;
          }
          dz_rows[r * ld + c] = d;
        }
        wave_sync();  // the chunk is in LDS before any lane loads it
        product_untransposed<T, MT, NB>(acc, dz_rows, ld, w + k0 * stride, stride, kFrag);
        wave_sync();  // every lane's A loads are done before the next chunk overwrites them
      }
    }

    // Hidden layers, last to first: dY = round(acc); dZ = round(dY * act') over the wave's rows;
    // then dY of the layer below (or dL/dinput) = dZ * W.
    for (int l = s.n_hidden - 1; l >= 0; --l) {
      const T* saved = args.hidden_deriv ? static_cast<const T*>(args.hidden_deriv) + l * mat : nullptr;
      T* dz_l = dz_base ? dz_base + l * mat : nullptr;
      // dY (rounded to T) into the rows from the registers that hold it: LDS offsets only, the
      // lane taken per layer (lane_this_iteration) so they are not hoisted out of the loops.
      const int layer_lane = lane_this_iteration();
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NB; ++n)
          for_each_element(acc[m][n], layer_lane, [&](int r, int c, float v) {
            dz_rows[(m * kFrag + r) * ld + n * kFrag + c] = from_float<T>(v);
          });
      // dZ = round(dY * act') in place, in a rolled loop over the rows in memory order: global
      // offsets are one running index from the wave's first row, so no per-element address
      // outlives an iteration (built from the accumulator layout, the compiler hoisted them all
      // out of the tile loop and spilled). Rows past the batch keep dY (zeros).
      if (s.act != Activation::None || dz_l) {
        wave_sync();  // every lane's dY is in LDS before lanes read each other's
        const int64_t first = row0 * WIDTH;  // the wave's first element in a dense hidden matrix
        const int n_valid = static_cast<int>(min(max(mat - first, int64_t{0}), int64_t{Tl::kRows * WIDTH}));
        const T* saved_rows = saved ? saved + first : nullptr;
        T* dz_out_rows = dz_l ? dz_l + first : nullptr;
#pragma unroll 1
        for (int i = lane; i < n_valid; i += kWarpSize) {
          T& slot = dz_rows[(i / WIDTH) * ld + i % WIDTH];
          float d = to_float(slot);
          if (s.act != Activation::None)
            d *= derivative_from_saved(s.act, to_float(saved_rows[i]), s.hidden_deriv_is_y);
          const T dz = from_float<T>(d);
          slot = dz;
          if (dz_out_rows) dz_out_rows[i] = dz;
        }
      }
      wave_sync();  // the dZ rows are complete before the product reads them
      if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, l);
      const T* w = smem + layer_smem_offset(WIDTH, s, l);
      if (l > 0) {
        zero(acc);
        product_untransposed<T, MT, NB>(acc, dz_rows, ld, w, stride, WIDTH);
        wave_sync();  // every lane's A loads are done before the epilogue overwrites the rows
      } else if (args.dL_dinput) {
        // dL/dinput = dZ_0 * W_0, 16 input columns at a time.
        const int in_stride = s.in_width + kSmemPad;
        T* din = static_cast<T*>(args.dL_dinput);
        for (int c0 = 0; c0 < s.in_width; c0 += kFrag) {
          FragAcc o[MT][1];
          zero(o);
          product_untransposed<T, MT, 1>(o, dz_rows, ld, w + c0, in_stride, WIDTH);
          // The lane taken per chunk: otherwise every element's row x ld_din (64-bit) is hoisted
          // out of the tile loop, filling RDNA's 256 VGPRs at 16 and 32 wide.
          const int chunk_lane = lane_this_iteration();
#pragma unroll
          for (int m = 0; m < MT; ++m)
            for_each_element(o[m][0], chunk_lane, [&](int r, int c, float v) {
              const int64_t row = row0 + m * kFrag + r;
              if (row < batch) din[row * args.ld_din + c0 + c] = from_float<T>(v);
            });
        }
      }
    }
    wave_sync();  // the last product's A loads are done before the next tile's dZ rows arrive
  }
}

}  // namespace tinyfuse::cuda::fused
