// The general fused forward pass, fused_forward_kernel (inference, and forward with the
// activations backward() needs): one kernel runs every layer of a tile of rows with the
// activations in registers; only the input is read and the output (plus, for training, each
// hidden layer's y and, where needed, z) written. See kernel_common.cuh for the tiling and
// launch_config.h for the grid. Every shape runs here, on every device (sm_75+); the planner
// (plan.cpp) prefers the pipelined and Hopper kernels where they apply (same values, bit for bit).
// HIP builds compile forward_hip.cuh's kernel (AMD matrix-core builtins, activations through LDS) in place of this
// file's (mma.sync, activations in registers); the host side below is shared.
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/plan.h"
#include "cuda/fused/run_time_activation.cuh"
#include "cuda/primitives/mma.cuh"
#if defined(TINYFUSE_WITH_HIP)
#include "cuda/fused/general/forward_hip.cuh"
#endif

namespace tinyfuse::cuda::fused {

namespace {

#if !defined(TINYFUSE_WITH_HIP)

template <int WIDTH>
using Tile = Tiling<WIDTH>;

// Hidden-layer epilogue: z = round(acc), y = round(act(z)); y becomes the next layer's A
// fragments; y (and z) are stored when asked.
template <typename T, int WIDTH>
__device__ __forceinline__ void hidden_epilogue(float (&acc)[Tile<WIDTH>::kMTiles][Tile<WIDTH>::kNTiles][4],
                                                uint32_t (&a)[Tile<WIDTH>::kMTiles][Tile<WIDTH>::kKSteps][4],
                                                Activation act, int64_t row0, int64_t batch, void* y_out, void* z_out) {
  const int g = lane_group(), t = lane_in_group();
#pragma unroll
  for (int m = 0; m < Tile<WIDTH>::kMTiles; ++m)
#pragma unroll
    for (int n = 0; n < Tile<WIDTH>::kNTiles; ++n) {
      // z = round(acc) (stored first: not live across the activation's call), then y = act(z)
      // through run_time_activation.cuh.
      float v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = round_to<T>(acc[m][n][i]);
      const int64_t r = row0 + 16 * m + g;
      const int col = 8 * n + 2 * t;
      if (z_out) {
        store_pair(z_out, WIDTH, r, col, batch, pack2<T>(v[0], v[1]));
        store_pair(z_out, WIDTH, r + 8, col, batch, pack2<T>(v[2], v[3]));
      }
      activate_run_time<kGeneralActivationCall, 4>(act, [&](int i) -> float& { return v[i]; });
      const uint32_t y_lo = pack2<T>(v[0], v[1]), y_hi = pack2<T>(v[2], v[3]);
      a[m][n / 2][(n % 2) * 2 + 0] = y_lo;
      a[m][n / 2][(n % 2) * 2 + 1] = y_hi;
      if (y_out) {
        store_pair(y_out, WIDTH, r, col, batch, y_lo);
        store_pair(y_out, WIDTH, r + 8, col, batch, y_hi);
      }
    }
}

// acc (rows x WIDTH) += A (rows x 16 * kKSteps, in registers) * W^T, W in shared memory
// (WIDTH x in, row stride in + pad), k-steps [0, kKSteps).
template <typename T, int WIDTH>
__device__ __forceinline__ void hidden_product(float (&acc)[Tile<WIDTH>::kMTiles][Tile<WIDTH>::kNTiles][4],
                                               const uint32_t (&a)[Tile<WIDTH>::kMTiles][Tile<WIDTH>::kKSteps][4],
                                               const T* w) {
  constexpr int stride = WIDTH + kSmemPad;
  const int lane = threadIdx.x % kWarpSize, q = lane / 8, r = lane % 8;
#pragma unroll
  for (int ks = 0; ks < Tile<WIDTH>::kKSteps; ++ks)
#pragma unroll
    for (int j = 0; j < Tile<WIDTH>::kNTiles / 2; ++j) {
      uint32_t b[4];
      ptx::ldmatrix_x4(b, ptx::shared_address(w + (16 * j + (q / 2) * 8 + r) * stride + 16 * ks + (q % 2) * 8));
#pragma unroll
      for (int m = 0; m < Tile<WIDTH>::kMTiles; ++m) {
        mma_16816<T>(acc[m][2 * j], a[m][ks], b[0], b[1]);
        mma_16816<T>(acc[m][2 * j + 1], a[m][ks], b[2], b[3]);
      }
    }
}

template <typename T, int WIDTH>
__device__ __forceinline__ void zero(float (&acc)[Tile<WIDTH>::kMTiles][Tile<WIDTH>::kNTiles][4]) {
#pragma unroll
  for (int m = 0; m < Tile<WIDTH>::kMTiles; ++m)
#pragma unroll
    for (int n = 0; n < Tile<WIDTH>::kNTiles; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.0f;
}

template <typename T, int WIDTH>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    fused_forward_kernel(KernelShape s, ForwardArgs args, int64_t n_tiles) {
  using Tl = Tile<WIDTH>;
  extern __shared__ uint4 smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const T* weights = static_cast<const T*>(args.weights);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane_group(), t = lane_in_group(), q = lane / 8, r8 = lane % 8;
  const int64_t batch = args.batch;
  if (s.resident) stage_all_layers<WIDTH>(smem, weights, s);

  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int64_t row0 = tile * Tl::kBlockRows + static_cast<int64_t>(warp) * Tl::kRows;
    float acc[Tl::kMTiles][Tl::kNTiles][4];
    uint32_t a[Tl::kMTiles][Tl::kKSteps][4];

    // Layer 0: the input (in_width columns) straight from global memory into A fragments.
    if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, 0);
    {
      const T* w = smem + layer_smem_offset(WIDTH, s, 0);
      const int stride = s.in_width + kSmemPad;
      zero<T, WIDTH>(acc);
      for (int ks = 0; ks < s.in_width / 16; ++ks) {
        uint32_t x[Tl::kMTiles][4];
#pragma unroll
        for (int m = 0; m < Tl::kMTiles; ++m) {
          const int64_t r = row0 + 16 * m + g;
          const int c = 16 * ks + 2 * t;
          x[m][0] = load_pair(args.input, args.ld_in, r, c, batch);
          x[m][1] = load_pair(args.input, args.ld_in, r + 8, c, batch);
          x[m][2] = load_pair(args.input, args.ld_in, r, c + 8, batch);
          x[m][3] = load_pair(args.input, args.ld_in, r + 8, c + 8, batch);
        }
#pragma unroll
        for (int j = 0; j < Tl::kNTiles / 2; ++j) {
          uint32_t b[4];
          ptx::ldmatrix_x4(b, ptx::shared_address(w + (16 * j + (q / 2) * 8 + r8) * stride + 16 * ks + (q % 2) * 8));
#pragma unroll
          for (int m = 0; m < Tl::kMTiles; ++m) {
            mma_16816<T>(acc[m][2 * j], x[m], b[0], b[1]);
            mma_16816<T>(acc[m][2 * j + 1], x[m], b[2], b[3]);
          }
        }
      }
    }
    const int64_t mat = batch * WIDTH;  // elements of one kept hidden matrix
    auto kept = [&](void* base, int l) -> void* {
      return base ? static_cast<void*>(static_cast<T*>(base) + l * mat) : nullptr;
    };
    hidden_epilogue<T, WIDTH>(acc, a, s.act, row0, batch, kept(args.hidden_y, 0), kept(args.hidden_z, 0));

    // Hidden layers 1 .. n_hidden - 1.
    for (int l = 1; l < s.n_hidden; ++l) {
      if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, l);
      zero<T, WIDTH>(acc);
      hidden_product<T, WIDTH>(acc, a, smem + layer_smem_offset(WIDTH, s, l));
      hidden_epilogue<T, WIDTH>(acc, a, s.act, row0, batch, kept(args.hidden_y, l), kept(args.hidden_z, l));
    }

    // Output layer, 16 columns at a time.
    if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, s.n_hidden);
    const T* w = smem + layer_smem_offset(WIDTH, s, s.n_hidden);
    constexpr int stride = WIDTH + kSmemPad;
    for (int c0 = 0; c0 < s.out_width; c0 += 16) {
      float o[Tl::kMTiles][2][4];
#pragma unroll
      for (int m = 0; m < Tl::kMTiles; ++m)
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) o[m][n][i] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < Tl::kKSteps; ++ks) {
        uint32_t b[4];
        ptx::ldmatrix_x4(b, ptx::shared_address(w + (c0 + (q / 2) * 8 + r8) * stride + 16 * ks + (q % 2) * 8));
#pragma unroll
        for (int m = 0; m < Tl::kMTiles; ++m) {
          mma_16816<T>(o[m][0], a[m][ks], b[0], b[1]);
          mma_16816<T>(o[m][1], a[m][ks], b[2], b[3]);
        }
      }
#pragma unroll
      for (int m = 0; m < Tl::kMTiles; ++m)
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          float v[4];  // z = round(o), stored first; then y = act(z), as the hidden layers
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = round_to<T>(o[m][n][i]);
          const int64_t r = row0 + 16 * m + g;
          const int col = c0 + 8 * n + 2 * t;
          if (args.out_z) {
            store_pair(args.out_z, s.out_width, r, col, batch, pack2<T>(v[0], v[1]));
            store_pair(args.out_z, s.out_width, r + 8, col, batch, pack2<T>(v[2], v[3]));
          }
          activate_run_time<kGeneralActivationCall, 4>(s.out_act, [&](int i) -> float& { return v[i]; });
          if (args.output) {
            store_pair(args.output, args.ld_out, r, col, batch, pack2<T>(v[0], v[1]));
            store_pair(args.output, args.ld_out, r + 8, col, batch, pack2<T>(v[2], v[3]));
          }
        }
    }
  }
}

#endif  // TINYFUSE_WITH_HIP

template <typename T, int WIDTH>
GeneralKernel kernel_of(const FusedShape& shape) {
#if defined(TINYFUSE_WITH_HIP)
  const size_t wave_bytes = hip_forward_wave_bytes<WIDTH>(shape.in_width, sizeof(T));
#else
  (void)shape;
  const size_t wave_bytes = 0;  // the activations stay in registers
#endif
  return {reinterpret_cast<const void*>(fused_forward_kernel<T, WIDTH>), Tiling<WIDTH>::kBlockRows,
          kWarpsPerBlock * wave_bytes};
}

template <typename T>
GeneralKernel kernel_by_width(const FusedShape& shape) {
  return with_hidden_width(shape.width, [&](auto width) { return kernel_of<T, decltype(width)::value>(shape); });
}

}  // namespace

FusedPlan plan_general_forward(const PlanInputs& in) {
  if (in.dtype == DType::F16) return plan_general(kernel_by_width<__half>(in.shape), in);
  if (in.dtype == DType::BF16) return plan_general(kernel_by_width<__nv_bfloat16>(in.shape), in);
  throw UnsupportedError("internal: fused MLP dtype " + to_string(in.dtype));
}

}  // namespace tinyfuse::cuda::fused
