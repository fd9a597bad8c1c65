// The fused second-derivative pass, fused_second_order_kernel: for a tile of rows, the forward
// recomputed and the three second-order sweeps (launch.h, SecondOrderArgs), every product on
// tensor cores with the weights in shared memory, every row's values in its warp's registers from
// one layer to the next. What one sweep leaves for a later one (z, dY / bz) and what the
// weight-gradient kernels read (the stacked [dz; dZ2] and [a; y]) go to scratch; each element is
// written and read back by the same lane (a pair's place in the accumulator layout is its place in
// the A-fragment layout), so the warps never wait for each other. Tiling, shared-memory weights
// and launch as the general forward and backward kernels (kernel_common.cuh).
// CUDA only (mma.sync); HIP builds run the FP32 sweeps (mlp_second_order.h).
#include "cuda/fused/epilogue.cuh"
#include "cuda/fused/general/mma_products.cuh"
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/plan.h"
#include "cuda/fused/run_time_activation.cuh"
#include "cuda/primitives/mma.cuh"

namespace tinyfuse::cuda::fused {

namespace {

#if !defined(TINYFUSE_WITH_HIP)

template <typename T, int WIDTH>
struct SecondOrderTile {
  using Tl = Tiling<WIDTH>;
  static constexpr int MT = Tl::kMTiles, NT = Tl::kNTiles, KS = Tl::kKSteps;
  static constexpr int kStride = WIDTH + kSmemPad;  // shared-memory row stride of a layer with WIDTH inputs
  using Acc = float[MT][NT][4];
  using Frags = uint32_t[MT][KS][4];
};

// A pair's row and column in a (rows x WIDTH) accumulator: tile (m, n), half h (row g or g + 8).
__device__ __forceinline__ int64_t pair_row(int64_t row0, int m, int h) { return row0 + 16 * m + lane_group() + 8 * h; }
__device__ __forceinline__ int pair_col(int n) { return 8 * n + 2 * lane_in_group(); }

// acc = src (batch x in_width, rows from row0) * W_0^T, W_0 in shared memory; the source's pairs
// also copied to `copy` (dense, in_width wide) where not null.
template <typename T, int WIDTH>
__device__ __forceinline__ void first_layer(float (&acc)[Tiling<WIDTH>::kMTiles][Tiling<WIDTH>::kNTiles][4],
                                            const void* src, int64_t ld, const T* w, int in_width, int64_t row0,
                                            int64_t batch, T* copy) {
  constexpr int MT = Tiling<WIDTH>::kMTiles, NT = Tiling<WIDTH>::kNTiles;
  const int g = lane_group(), t = lane_in_group();
  const int stride = in_width + kSmemPad;
  zero(acc);
  for (int ks = 0; ks < in_width / 16; ++ks) {
    uint32_t x[MT][1][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // a0 / a2: row g, a1 / a3: row g + 8; a2 / a3: 8 columns on
        const int64_t r = row0 + 16 * m + g + (i % 2) * 8;
        const int c = 16 * ks + 2 * t + (i / 2) * 8;
        x[m][0][i] = load_pair(src, ld, r, c, batch);
        if (copy) store_pair(copy, in_width, r, c, batch, x[m][0][i]);
      }
    times_weights_transposed<T, MT, 1, NT / 2>(acc, x, w + 16 * ks, stride, 0);
  }
}

template <typename T, int WIDTH>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize, 2)
    fused_second_order_kernel(KernelShape s, SecondOrderArgs args, int64_t n_tiles) {
  using Tl = Tiling<WIDTH>;
  constexpr int MT = Tl::kMTiles, NT = Tl::kNTiles, KS = Tl::kKSteps;
  constexpr int stride = WIDTH + kSmemPad;
  extern __shared__ uint4 smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const T* weights = static_cast<const T*>(args.weights);
  const int warp = threadIdx.x / kWarpSize;
  const int t = lane_in_group();
  const int64_t batch = args.batch;
  const int top = s.n_hidden;  // the output layer
  const bool hidden_curved = args.hidden_curved, out_curved = args.out_curved;
  // Layers [0, n_flowing) get a second-order dZ2 (sweep 3 starts at the topmost curved layer).
  const int n_flowing = out_curved ? top + 1 : hidden_curved ? top : 0;
  const int64_t stack = n_flowing > 0 ? 2 : 1;

  // Layer l's matrix in the by-layer scratch areas (launch.h), and its row stride.
  auto by_out = [&](void* base, int l, int64_t rows) -> T* {
    return base ? static_cast<T*>(base) + static_cast<int64_t>(l) * rows * batch * WIDTH : nullptr;
  };
  auto by_in = [&](void* base, int l) -> T* {
    if (!base) return nullptr;
    const int64_t first = stack * batch * s.in_width;
    return static_cast<T*>(base) + (l == 0 ? 0 : first + static_cast<int64_t>(l - 1) * stack * batch * WIDTH);
  };
  T* const zs = static_cast<T*>(args.z);
  auto z_of = [&](int l) { return by_out(zs, l, 1); };
  auto dy_of = [&](int l) { return by_out(args.dy, l, 1); };
  auto dz_of = [&](int l) { return by_out(args.dz, l, stack); };
  const int out_w = s.out_width;
  const int64_t second_half_out = batch;  // rows: dZ2 follows dz, y follows a

  if (s.resident) stage_all_layers<WIDTH>(smem, weights, s);
  auto weights_of = [&](int l) -> const T* {
    if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, l);
    return smem + layer_smem_offset(WIDTH, s, l);
  };

  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int64_t row0 = tile * Tl::kBlockRows + static_cast<int64_t>(warp) * Tl::kRows;
    float acc[MT][NT][4];
    uint32_t a[MT][KS][4];

    // ---- The forward pass: z of every layer with an activation, y of the hidden layers (the A
    // fragments of the next layer, and the second half of its [a; y]).
    {
      T* x0 = by_in(args.x, 0);
      first_layer<T, WIDTH>(acc, args.input, args.ld_in, weights_of(0), s.in_width, row0, batch,
                            x0 && stack == 2 ? x0 + second_half_out * s.in_width : nullptr);
    }
    for (int l = 0; l < top; ++l) {
      if (l > 0) {
        zero(acc);
        times_weights_transposed<T, MT, KS, NT / 2>(acc, a, weights_of(l), stride, 0);
      }
      T* z = z_of(l);
      T* y_next = by_in(args.x, l + 1);
      if (y_next && stack == 2) y_next += second_half_out * WIDTH;
      else y_next = nullptr;
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t r = pair_row(row0, m, h);
            const int c = pair_col(n);
            float v[2] = {round_to<T>(acc[m][n][2 * h]), round_to<T>(acc[m][n][2 * h + 1])};
            if (s.act != Activation::None) store_pair(z, WIDTH, r, c, batch, pack2<T>(v[0], v[1]));
            activate_run_time<kGeneralActivationCall, 2>(s.act, [&](int i) -> float& { return v[i]; });
            const uint32_t y = pack2<T>(v[0], v[1]);
            a[m][n / 2][(n % 2) * 2 + h] = y;
            if (y_next) store_pair(y_next, WIDTH, r, c, batch, y);
          }
    }
    if (s.out_act != Activation::None) {
      const T* w = weights_of(top);
      for (int c0 = 0; c0 < out_w; c0 += 16) {
        float o[MT][2][4];
        zero(o);
        times_weights_transposed<T, MT, KS, 1>(o, a, w, stride, c0);
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int n = 0; n < 2; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              store_pair(z_of(top), out_w, pair_row(row0, m, h), c0 + pair_col(n), batch,
                         z_pair<T>(o[m][n][2 * h], o[m][n][2 * h + 1]));
      }
    }

    // ---- Sweep 1, the backward from g: dz of every layer (the first half of its [dz; dZ2]); dY
    // of the curved layers, for sweep 2.
    {
      const T* w = weights_of(top);
      T* dz = dz_of(top);
      zero(acc);
      for (int k0 = 0; k0 < out_w; k0 += 16) {
        uint32_t d[MT][1][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int64_t r = pair_row(row0, m, i % 2);
            const int c = k0 + 2 * t + (i / 2) * 8;
            const uint32_t dy = load_pair(args.dL_doutput, args.ld_dout, r, c, batch);
            uint32_t v = dy;
            if (s.out_act != Activation::None) {
              const float2 zz = unpack2<T>(load_pair(z_of(top), out_w, r, c, batch));
              const float4 der = pair_derivatives(s.out_act, zz.x, zz.y);
              const float2 g = unpack2<T>(dy);
              v = pack2<T>(g.x * der.x, g.y * der.y);
            }
            if (out_curved) store_pair(dy_of(top), out_w, r, c, batch, dy);
            if (dz) store_pair(dz, out_w, r, c, batch, v);
            d[m][0][i] = v;
          }
        times_weights<T, MT, 1, NT / 2>(acc, d, 0, w, stride, k0, 0);
      }
    }
    for (int l = top - 1; l >= 0; --l) {
      T* dz = dz_of(l);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t r = pair_row(row0, m, h);
            const int c = pair_col(n);
            const float dy0 = round_to<T>(acc[m][n][2 * h]), dy1 = round_to<T>(acc[m][n][2 * h + 1]);
            uint32_t v = pack2<T>(dy0, dy1);
            if (hidden_curved) store_pair(dy_of(l), WIDTH, r, c, batch, v);
            if (s.act != Activation::None) {
              const float2 zz = unpack2<T>(load_pair(z_of(l), WIDTH, r, c, batch));
              const float4 der = pair_derivatives(s.act, zz.x, zz.y);
              v = pack2<T>(dy0 * der.x, dy1 * der.y);
            }
            a[m][n / 2][(n % 2) * 2 + h] = v;
            if (dz) store_pair(dz, WIDTH, r, c, batch, v);
          }
      if (l > 0) {
        const T* w = weights_of(l);
        zero(acc);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) times_weights<T, MT, KS, NT / 2>(acc, a, ks, w, stride, 16 * ks, 0);
      }
    }

    // ---- Sweep 2, from v up: bdz = a_{l-1} W_l^T; a_l = bdz act'(z_l) (the first half of the next
    // layer's [a; y]); bz_l = dY_l act''(z_l) bdz in place of dY_l; dL2/dg = the output layer's a.
    first_layer<T, WIDTH>(acc, args.dL_ddLdinput, args.ld_v, weights_of(0), s.in_width, row0, batch, by_in(args.x, 0));
    for (int l = 0; l < top; ++l) {
      if (l > 0) {
        zero(acc);
        times_weights_transposed<T, MT, KS, NT / 2>(acc, a, weights_of(l), stride, 0);
      }
      T* a_next = by_in(args.x, l + 1);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t r = pair_row(row0, m, h);
            const int c = pair_col(n);
            const float b0 = round_to<T>(acc[m][n][2 * h]), b1 = round_to<T>(acc[m][n][2 * h + 1]);
            float4 der = make_float4(1.0f, 1.0f, 0.0f, 0.0f);
            if (s.act != Activation::None) {
              const float2 zz = unpack2<T>(load_pair(z_of(l), WIDTH, r, c, batch));
              der = pair_derivatives(s.act, zz.x, zz.y);
            }
            const uint32_t v = pack2<T>(b0 * der.x, b1 * der.y);
            a[m][n / 2][(n % 2) * 2 + h] = v;
            if (a_next) store_pair(a_next, WIDTH, r, c, batch, v);
            if (hidden_curved) {
              const float2 dy = unpack2<T>(load_pair(dy_of(l), WIDTH, r, c, batch));
              store_pair(dy_of(l), WIDTH, r, c, batch, pack2<T>(dy.x * der.z * b0, dy.y * der.w * b1));
            }
          }
    }
    if (args.dL_ddLdoutput || out_curved) {
      const T* w = weights_of(top);
      for (int c0 = 0; c0 < out_w; c0 += 16) {
        float o[MT][2][4];
        zero(o);
        times_weights_transposed<T, MT, KS, 1>(o, a, w, stride, c0);
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int n = 0; n < 2; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int64_t r = pair_row(row0, m, h);
              const int c = c0 + pair_col(n);
              const float b0 = round_to<T>(o[m][n][2 * h]), b1 = round_to<T>(o[m][n][2 * h + 1]);
              float4 der = make_float4(1.0f, 1.0f, 0.0f, 0.0f);
              if (s.out_act != Activation::None) {
                const float2 zz = unpack2<T>(load_pair(z_of(top), out_w, r, c, batch));
                der = pair_derivatives(s.out_act, zz.x, zz.y);
              }
              if (args.dL_ddLdoutput)
                store_pair(args.dL_ddLdoutput, args.ld_ddout, r, c, batch, pack2<T>(b0 * der.x, b1 * der.y));
              if (out_curved) {
                const float2 dy = unpack2<T>(load_pair(dy_of(top), out_w, r, c, batch));
                store_pair(dy_of(top), out_w, r, c, batch, pack2<T>(dy.x * der.z * b0, dy.y * der.w * b1));
              }
            }
      }
    }

    // ---- Sweep 3, from the topmost curved layer down: dZ2_l = bz_l + e_l act'(z_l), e_l =
    // dZ2_{l+1} W_{l+1} (the second half of [dz; dZ2]); dL2/dinput = dZ2_0 W_0.
    if (n_flowing == 0) continue;
    bool have_e = false;
    if (n_flowing == top + 1) {  // a curved output layer: dZ2 = bz, 16 columns at a time
      const T* w = weights_of(top);
      T* dz = dz_of(top);
      zero(acc);
      for (int k0 = 0; k0 < out_w; k0 += 16) {
        uint32_t d[MT][1][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int64_t r = pair_row(row0, m, i % 2);
            const int c = k0 + 2 * t + (i / 2) * 8;
            d[m][0][i] = load_pair(dy_of(top), out_w, r, c, batch);
            if (dz) store_pair(dz + second_half_out * out_w, out_w, r, c, batch, d[m][0][i]);
          }
        times_weights<T, MT, 1, NT / 2>(acc, d, 0, w, stride, k0, 0);
      }
      have_e = true;
    }
    for (int l = top - 1; l >= 0; --l) {
      T* dz = dz_of(l);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t r = pair_row(row0, m, h);
            const int c = pair_col(n);
            float e0 = 0.0f, e1 = 0.0f, bz0 = 0.0f, bz1 = 0.0f;
            if (have_e) {
              e0 = round_to<T>(acc[m][n][2 * h]);
              e1 = round_to<T>(acc[m][n][2 * h + 1]);
              if (s.act != Activation::None) {
                const float2 zz = unpack2<T>(load_pair(z_of(l), WIDTH, r, c, batch));
                const float4 der = pair_derivatives(s.act, zz.x, zz.y);
                e0 *= der.x;
                e1 *= der.y;
              }
            }
            if (hidden_curved) {
              const float2 bz = unpack2<T>(load_pair(dy_of(l), WIDTH, r, c, batch));
              bz0 = bz.x;
              bz1 = bz.y;
            }
            const uint32_t v = pack2<T>(bz0 + e0, bz1 + e1);
            a[m][n / 2][(n % 2) * 2 + h] = v;
            if (dz) store_pair(dz + second_half_out * WIDTH, WIDTH, r, c, batch, v);
          }
      have_e = true;
      const T* w = weights_of(l);
      if (l > 0) {
        zero(acc);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) times_weights<T, MT, KS, NT / 2>(acc, a, ks, w, stride, 16 * ks, 0);
      } else if (args.dL_dinput) {
        const int in_stride = s.in_width + kSmemPad;
        for (int c0 = 0; c0 < s.in_width; c0 += 16) {
          float o[MT][2][4];
          zero(o);
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) times_weights<T, MT, KS, 1>(o, a, ks, w, in_stride, 16 * ks, c0);
#pragma unroll
          for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int n = 0; n < 2; ++n)
#pragma unroll
              for (int h = 0; h < 2; ++h)
                store_pair(args.dL_dinput, args.ld_din, pair_row(row0, m, h), c0 + pair_col(n), batch,
                           pack2<T>(o[m][n][2 * h], o[m][n][2 * h + 1]));
        }
      }
    }
  }
}

template <typename T, int WIDTH>
GeneralKernel kernel_of() {
  return {reinterpret_cast<const void*>(fused_second_order_kernel<T, WIDTH>), Tiling<WIDTH>::kBlockRows, 0};
}

template <typename T>
GeneralKernel kernel_by_width(int width) {
  switch (width) {
    case 16: return kernel_of<T, 16>();
    case 32: return kernel_of<T, 32>();
    case 64: return kernel_of<T, 64>();
    case 128: return kernel_of<T, 128>();
  }
  throw UnsupportedError("internal: fused MLP width " + std::to_string(width));
}

#endif  // !TINYFUSE_WITH_HIP

}  // namespace

FusedPlan plan_general_second_order(const PlanInputs& in) {
#if defined(TINYFUSE_WITH_HIP)
  (void)in;
  return FusedPlan{};  // the FP32 sweeps run instead
#else
  FusedPlan p;
  if (in.dtype == DType::F16) p = plan_general(kernel_by_width<__half>(in.shape.width), in);
  else if (in.dtype == DType::BF16) p = plan_general(kernel_by_width<__nv_bfloat16>(in.shape.width), in);
  else throw UnsupportedError("internal: fused MLP dtype " + to_string(in.dtype));
  p.kernel = FusedKernel::GeneralSecondOrder;
  return p;
#endif
}

}  // namespace tinyfuse::cuda::fused
