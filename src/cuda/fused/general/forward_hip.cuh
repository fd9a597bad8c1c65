// FullyFusedMLP's forward kernel on AMD GPUs (matrix-core builtins: primitives/amd_matrix_ops.cuh),
// included by forward.cu in HIP builds.
//
// The structure of the CUDA kernel (forward.cu): blocks of kWarpsPerBlock waves loop over tiles of
// kBlockRows batch rows; each wave owns Tiling<WIDTH>::kRows rows for the whole depth; weights
// are resident in LDS or staged one layer at a time (kernel_common.cuh, same layout and pad);
// every value is rounded where launch.h says. What differs: an AMD accumulator's layout is not the
// next product's A layout, so a layer's output does not stay in registers as the next layer's A
// operand (the CUDA kernel's m16n8k16 accumulator -> A reuse). Each wave keeps its rows'
// activations in an LDS buffer instead: the input is copied there (zeros past the batch), a
// layer's accumulators for all of its output columns are computed from it, then the epilogue
// writes them back over it from the registers (wmma_layers_hip.cuh). LDS per block: the weights
// (as on CUDA), then per wave the activation rows (max(in_width, WIDTH) + kSmemPad wide).
#pragma once

#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/general/wmma_layers_hip.cuh"

namespace tinyfuse::cuda::fused {

// Row stride (elements) of a wave's activation buffer, and its LDS bytes per wave.
__host__ __device__ inline int hip_act_ld(int width, int in_width) { return (in_width > width ? in_width : width) + kSmemPad; }
template <int WIDTH>
size_t hip_forward_wave_bytes(int in_width, size_t elem_bytes) {
  return wave_lds_bytes(Tiling<WIDTH>::kRows, hip_act_ld(WIDTH, in_width), elem_bytes);
}

// A hidden layer's accumulators -> z = round(acc), y = round(act(z)); y over the wave's
// activation rows (the layer's input, no longer read), y and z to global memory when asked.
template <typename T, int MT, int NB>
__device__ __forceinline__ void hip_hidden_epilogue(FragAcc (&acc)[MT][NB], T* act_rows, int ld_act, Activation act,
                                                    int64_t row0, int64_t batch, void* y_out, void* z_out, int lane) {
  constexpr int width = NB * kFrag;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NB; ++n)
      for_each_element(acc[m][n], lane, [&](int r, int c, float v) {
        const float z = round_to<T>(v);
        const T y = from_float<T>(fused_activate(act, z));
        const int rr = m * kFrag + r, col = n * kFrag + c;
        act_rows[rr * ld_act + col] = y;
        const int64_t row = row0 + rr;
        if (row < batch) {
          if (y_out) static_cast<T*>(y_out)[row * width + col] = y;
          if (z_out) static_cast<T*>(z_out)[row * width + col] = from_float<T>(z);
        }
      });
  wave_sync();  // the rows are complete before the next product reads them
}

template <typename T, int WIDTH>
__global__ void __launch_bounds__(kWarpsPerBlock* kMaxWarpSize)
    fused_forward_kernel(KernelShape s, ForwardArgs args, int64_t n_tiles, size_t weight_lds_bytes) {
  using Tl = Tiling<WIDTH>;
  constexpr int MT = Tl::kMTiles, NB = WIDTH / kFrag, stride = WIDTH + kSmemPad;
  extern __shared__ uint4 smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const T* weights = static_cast<const T*>(args.weights);
  const int warp = wave_index(), lane = wave_lane();
  const int64_t batch = args.batch;
  const int ld_act = hip_act_ld(WIDTH, s.in_width);
  const size_t wave_bytes = wave_lds_bytes(Tl::kRows, ld_act, sizeof(T));
  unsigned char* wave_lds = reinterpret_cast<unsigned char*>(smem_raw) + weight_lds_bytes + warp * wave_bytes;
  T* act_rows = reinterpret_cast<T*>(wave_lds);
  if (s.resident) stage_all_layers<WIDTH>(smem, weights, s);

  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int64_t row0 = tile * Tl::kBlockRows + static_cast<int64_t>(warp) * Tl::kRows;
    const int tile_lane = lane_this_iteration();  // amd_matrix_ops.cuh: no per-element offsets hoisted
    const int64_t mat = batch * WIDTH;  // elements of one kept hidden matrix
    auto kept = [&](void* base, int l) -> void* {
      return base ? static_cast<void*>(static_cast<T*>(base) + l * mat) : nullptr;
    };
    load_rows_16(act_rows, ld_act, static_cast<const T*>(args.input), args.ld_in, row0, Tl::kRows, s.in_width, batch,
                 lane);  // launch.h: input 16-byte aligned, row stride a multiple of 8
    wave_sync();

    FragAcc acc[MT][NB];
    for (int l = 0; l < s.n_hidden; ++l) {
      if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, l);
      zero(acc);
      const int in = layer_in(WIDTH, s, l);
      product<T, MT, NB>(acc, act_rows, ld_act, smem + layer_smem_offset(WIDTH, s, l), in + kSmemPad, in);
      wave_sync();  // every lane's A loads are done before the rows are overwritten
      hip_hidden_epilogue<T, MT, NB>(acc, act_rows, ld_act, s.act, row0, batch, kept(args.hidden_y, l),
                                     kept(args.hidden_z, l), tile_lane);
    }

    // Output layer, 16 columns at a time, straight to global memory.
    if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, s.n_hidden);
    const T* w = smem + layer_smem_offset(WIDTH, s, s.n_hidden);
    for (int c0 = 0; c0 < s.out_width; c0 += kFrag) {
      FragAcc o[MT][1];
      zero(o);
      product<T, MT, 1>(o, act_rows, ld_act, w + c0 * stride, stride, WIDTH);
#pragma unroll
      for (int m = 0; m < MT; ++m)
        for_each_element(o[m][0], tile_lane, [&](int r, int c, float v) {
          const float z = round_to<T>(v);
          const int64_t row = row0 + m * kFrag + r;
          const int col = c0 + c;
          if (row >= batch) return;
          if (args.output) static_cast<T*>(args.output)[row * args.ld_out + col] = from_float<T>(fused_activate(s.out_act, z));
          if (args.out_z) static_cast<T*>(args.out_z)[row * s.out_width + col] = from_float<T>(z);
        });
    }
    wave_sync();  // the output layer's A loads are done before the next tile's rows arrive
  }
}

}  // namespace tinyfuse::cuda::fused
