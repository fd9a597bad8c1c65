// The fused backward pass: one kernel runs every layer of a tile of rows from dL/doutput back to
// dL/dinput, with dY and dZ in registers. Per layer it writes dZ (when parameter gradients are
// wanted: the weight-gradient kernel multiplies it with the layer's input afterwards), and at the
// end dL/dinput when asked. Same tiling and shared-memory weights as the forward kernel.
//
// In the product dY_prev (rows x in) = dZ (rows x out) * W (out x in) the weights are the B
// operand with k = out, n = in, i.e. B[k][n] = W[k][n] read as 8x8 blocks transposed
// (ldmatrix .trans) from the forward layout.
// The planner (plan.cpp) prefers the pipelined backward where it applies
// (pipelined/backward_kernel.cuh; same values, bit for bit).
// HIP builds compile backward_hip.cuh's kernel (AMD matrix-core builtins, dZ through LDS) in place of this file's
// (mma.sync, dZ in registers); the host side below is shared.
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/general/mma_products.cuh"
#include "cuda/fused/plan.h"
#include "cuda/primitives/mma.cuh"
#if defined(TINYFUSE_WITH_HIP)
#include "cuda/fused/general/backward_hip.cuh"
#else
#include "cuda/fused/epilogue.cuh"
#endif

namespace tinyfuse::cuda::fused {

namespace {

#if !defined(TINYFUSE_WITH_HIP)

template <int WIDTH>
using Tile = Tiling<WIDTH>;

// At least three blocks per SM (at most 168 registers): the run-time activation's out-of-line
// call (run_time_activation.cuh), made while the output layer's accumulators are live, otherwise
// takes ptxas to 180 registers at 64 wide (138 with the activation inlined).
template <typename T, int WIDTH>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize, 3)
    fused_backward_kernel(KernelShape s, BackwardArgs args, int64_t n_tiles) {
  using Tl = Tile<WIDTH>;
  constexpr int MT = Tl::kMTiles;
  extern __shared__ uint4 smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const T* weights = static_cast<const T*>(args.weights);
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane_group(), t = lane_in_group();
  const int64_t batch = args.batch;
  const bool hidden_from_y = s.hidden_deriv_is_y;
  const int64_t mat = batch * WIDTH;
  T* dz_base = static_cast<T*>(args.dz);
  if (s.resident) stage_all_layers<WIDTH>(smem, weights, s);

  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int64_t row0 = tile * Tl::kBlockRows + static_cast<int64_t>(warp) * Tl::kRows;
    float acc[MT][Tl::kNTiles][4];
    uint32_t dz[MT][Tl::kKSteps][4];

    // Output layer: dZ = dL/doutput * act'(z), 16 columns (one k-step) at a time, straight into
    // dY of the last hidden layer = dZ * W_out.
    if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, s.n_hidden);
    {
      const T* w = smem + layer_smem_offset(WIDTH, s, s.n_hidden);
      T* dz_out = dz_base ? dz_base + s.n_hidden * mat : nullptr;
      zero(acc);
      for (int k0 = 0; k0 < s.out_width; k0 += 16) {
        uint32_t d[MT][1][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int64_t r = row0 + 16 * m + g + (i % 2) * 8;  // a0, a2: row g; a1, a3: row g + 8
            const int c = k0 + 2 * t + (i / 2) * 8;
            const uint32_t dy = load_pair(args.dL_doutput, args.ld_dout, r, c, batch);
            if (s.out_act == Activation::None) {
              d[m][0][i] = dy;
            } else {
              const float2 dyf = unpack2<T>(dy);
              d[m][0][i] = dz_pair<T>(dyf.x, dyf.y, s.out_act, load_pair(args.out_z, s.out_width, r, c, batch), false);
            }
            if (dz_out) store_pair(dz_out, s.out_width, r, c, batch, d[m][0][i]);
          }
        times_weights<T, MT, 1, Tl::kNTiles / 2>(acc, d, 0, w, WIDTH + kSmemPad, k0, 0);
      }
    }

    // Hidden layers, last to first: dY = round(acc); dZ = round(dY * act'); then dY of the layer
    // below (or dL/dinput) = dZ * W.
    for (int l = s.n_hidden - 1; l >= 0; --l) {
      const void* saved = args.hidden_deriv ? static_cast<const T*>(args.hidden_deriv) + l * mat : nullptr;
      T* dz_l = dz_base ? dz_base + l * mat : nullptr;
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < Tl::kNTiles; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // h = 0: row g (c0, c1); h = 1: row g + 8 (c2, c3)
            const int64_t r = row0 + 16 * m + g + 8 * h;
            const int c = 8 * n + 2 * t;
            const float dy0 = round_to<T>(acc[m][n][2 * h]), dy1 = round_to<T>(acc[m][n][2 * h + 1]);
            const uint32_t sv = s.act == Activation::None ? 0u : load_pair(saved, WIDTH, r, c, batch);
            const uint32_t v = dz_pair<T>(dy0, dy1, s.act, sv, hidden_from_y);
            dz[m][n / 2][(n % 2) * 2 + h] = v;
            if (dz_l) store_pair(dz_l, WIDTH, r, c, batch, v);
          }
      if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, l);
      const T* w = smem + layer_smem_offset(WIDTH, s, l);
      if (l > 0) {
        zero(acc);
#pragma unroll
        for (int ks = 0; ks < Tl::kKSteps; ++ks)
          times_weights<T, MT, Tl::kKSteps, Tl::kNTiles / 2>(acc, dz, ks, w, WIDTH + kSmemPad, 16 * ks, 0);
      } else if (args.dL_dinput) {
        // dL/dinput = dZ_0 * W_0, 16 input columns at a time.
        const int stride = s.in_width + kSmemPad;
        for (int c0 = 0; c0 < s.in_width; c0 += 16) {
          float o[MT][2][4];
          zero(o);
#pragma unroll
          for (int ks = 0; ks < Tl::kKSteps; ++ks) times_weights<T, MT, Tl::kKSteps, 1>(o, dz, ks, w, stride, 16 * ks, c0);
#pragma unroll
          for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int n = 0; n < 2; ++n) {
              const int64_t r = row0 + 16 * m + g;
              const int c = c0 + 8 * n + 2 * t;
              store_pair(args.dL_dinput, args.ld_din, r, c, batch, pack2<T>(o[m][n][0], o[m][n][1]));
              store_pair(args.dL_dinput, args.ld_din, r + 8, c, batch, pack2<T>(o[m][n][2], o[m][n][3]));
            }
        }
      }
    }
  }
}

#endif  // TINYFUSE_WITH_HIP

template <typename T, int WIDTH>
GeneralKernel kernel_of() {
#if defined(TINYFUSE_WITH_HIP)
  const size_t wave_bytes = hip_backward_wave_bytes<WIDTH>(sizeof(T));
#else
  const size_t wave_bytes = 0;  // dY and dZ stay in registers
#endif
  return {reinterpret_cast<const void*>(fused_backward_kernel<T, WIDTH>), Tiling<WIDTH>::kBlockRows,
          kWarpsPerBlock * wave_bytes};
}

template <typename T>
GeneralKernel kernel_by_width(int width) {
  return with_hidden_width(width, [](auto w) { return kernel_of<T, decltype(w)::value>(); });
}

}  // namespace

FusedPlan plan_general_backward(const PlanInputs& in) {
  if (in.dtype == DType::F16) return plan_general(kernel_by_width<__half>(in.shape.width), in);
  if (in.dtype == DType::BF16) return plan_general(kernel_by_width<__nv_bfloat16>(in.shape.width), in);
  throw UnsupportedError("internal: fused MLP dtype " + to_string(in.dtype));
}

}  // namespace tinyfuse::cuda::fused
