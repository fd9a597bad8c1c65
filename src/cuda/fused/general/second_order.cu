// The fused second-derivative pass, fused_second_order_kernel: for a tile of rows, the forward
// recomputed and the three second-order sweeps (launch.h, SecondOrderArgs), every product on
// tensor cores with the weights in shared memory, every row's values in its warp's registers from
// one layer to the next. What one sweep leaves for a later one stays in the warp's own rows of
// shared memory: per layer act'(z), and where the activation is curved act''(z), then dY act''(z),
// then bz (all three derivatives come from one activation call in the forward). Each element is written and read back by the same lane (a pair's place in the
// accumulator layout is its place in the A-fragment layout), so the warps never wait for each
// other. Only the weight-gradient kernels' operands (the stacked [dz; dZ2] and [a; y]) and the
// results go to global memory. Tiling and weights as the general forward and backward kernels
// (kernel_common.cuh). CUDA only (mma.sync); HIP builds run the FP32 sweeps (mlp_second_order.h).
#include "core/activation_math.h"
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/plan.h"
#if !defined(TINYFUSE_WITH_HIP)
#include "cuda/fused/general/mma_products.cuh"
#include "cuda/fused/run_time_activation.cuh"
#include "cuda/primitives/mma.cuh"
#endif

namespace tinyfuse::cuda::fused {

namespace {

#if !defined(TINYFUSE_WITH_HIP)

// A pair's row in the warp's rows and its column in a (rows x 8 * N) accumulator: tile (m, n),
// half h (row g or g + 8).
__device__ __forceinline__ int pair_row(int m, int h) { return 16 * m + lane_group() + 8 * h; }
__device__ __forceinline__ int pair_col(int n) { return 8 * n + 2 * lane_in_group(); }

// One layer's rows of a warp in shared memory (row stride out + 8): slot 0 act'(z); slot 1
// (curved layers) act''(z), then dY act''(z), then bz.
template <typename T>
struct LayerRows {
  T* at[2];
  int ld;
  __device__ __forceinline__ uint32_t get(int slot, int row, int col) const {
    return *reinterpret_cast<const uint32_t*>(at[slot] + row * ld + col);
  }
  __device__ __forceinline__ void put(int slot, int row, int col, uint32_t v) const {
    *reinterpret_cast<uint32_t*>(at[slot] + row * ld + col) = v;
  }
};

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

// The forward's per-pair step from the rounded pre-activations: act'(z) into slot 0 (unless act
// is None) and act''(z) into slot 1 (curved layers), rounded; returns y = act(z) packed.
template <typename T>
__device__ __forceinline__ uint32_t forward_pair(const LayerRows<T>& rows, Activation act, bool curved, int row, int col,
                                                 float z0, float z1) {
  if (act == Activation::None) return pack2<T>(z0, z1);
  const Floats<6> f = activation_derivatives<2>(act, Floats<2>{{z0, z1}});
  rows.put(0, row, col, pack2<T>(f.v[2], f.v[3]));
  if (curved) rows.put(1, row, col, pack2<T>(f.v[4], f.v[5]));
  return pack2<T>(f.v[0], f.v[1]);
}

// Sweep 1's per-pair step for the incoming dY: dY act''(z) in place of act''(z) (curved layers);
// returns dZ = dY act'(z) packed.
template <typename T>
__device__ __forceinline__ uint32_t first_sweep_pair(const LayerRows<T>& rows, Activation act, bool curved, int row,
                                                     int col, float dy0, float dy1) {
  if (curved) {
    const float2 d2 = unpack2<T>(rows.get(1, row, col));
    rows.put(1, row, col, pack2<T>(dy0 * d2.x, dy1 * d2.y));
  }
  if (act == Activation::None) return pack2<T>(dy0, dy1);
  const float2 d1 = unpack2<T>(rows.get(0, row, col));
  return pack2<T>(dy0 * d1.x, dy1 * d1.y);
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
  const int out_w = s.out_width;

  // This warp's rows of each layer in shared memory (second_order_warp_state_bytes's layout).
  const int hidden_elems = Tl::kRows * (WIDTH + 8), out_elems = Tl::kRows * (out_w + 8);
  const int warp_elems = top * hidden_elems * (hidden_curved ? 2 : 1) + out_elems * (out_curved ? 2 : 1);
  T* const state = reinterpret_cast<T*>(reinterpret_cast<char*>(smem_raw) + args.state_offset) + warp * warp_elems;
  auto rows_of = [&](int l) {
    LayerRows<T> r;
    if (l < top) {
      r.at[0] = state + l * hidden_elems * (hidden_curved ? 2 : 1);
      r.at[1] = r.at[0] + hidden_elems;
      r.ld = WIDTH + 8;
    } else {
      r.at[0] = state + top * hidden_elems * (hidden_curved ? 2 : 1);
      r.at[1] = r.at[0] + out_elems;
      r.ld = out_w + 8;
    }
    return r;
  };

  // Layer l's matrix of the weight-gradient operands (launch.h), and the second half's offset.
  auto dz_of = [&](int l) -> T* {
    return args.dz ? static_cast<T*>(args.dz) + static_cast<int64_t>(l) * stack * batch * WIDTH : nullptr;
  };
  auto x_of = [&](int l) -> T* {
    if (!args.x) return nullptr;
    const int64_t first = stack * batch * s.in_width;
    return static_cast<T*>(args.x) + (l == 0 ? 0 : first + static_cast<int64_t>(l - 1) * stack * batch * WIDTH);
  };
  const int64_t second_half = batch;  // rows: dZ2 follows dz, y follows a

  if (s.resident) stage_all_layers<WIDTH>(smem, weights, s);
  auto weights_of = [&](int l) -> const T* {
    if (!s.resident) stage_one_layer<WIDTH>(smem, weights, s, l);
    return smem + layer_smem_offset(WIDTH, s, l);
  };

  for (int64_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const int64_t row0 = tile * Tl::kBlockRows + static_cast<int64_t>(warp) * Tl::kRows;
    float acc[MT][NT][4];
    uint32_t a[MT][KS][4];

    // ---- The forward pass: act'(z) and act''(z) of every layer (slots 0 and 1), y of the hidden
    // layers (the next layer's A fragments, and the second half of its [a; y]).
    {
      T* x0 = x_of(0);
      first_layer<T, WIDTH>(acc, args.input, args.ld_in, weights_of(0), s.in_width, row0, batch,
                            x0 && stack == 2 ? x0 + second_half * s.in_width : nullptr);
    }
    for (int l = 0; l < top; ++l) {
      if (l > 0) {
        zero(acc);
        times_weights_transposed<T, MT, KS, NT / 2>(acc, a, weights_of(l), stride, 0);
      }
      const LayerRows<T> rows = rows_of(l);
      T* y_next = x_of(l + 1);
      y_next = y_next && stack == 2 ? y_next + second_half * WIDTH : nullptr;
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int rr = pair_row(m, h), c = pair_col(n);
            const uint32_t y = forward_pair(rows, s.act, hidden_curved, rr, c, round_to<T>(acc[m][n][2 * h]),
                                            round_to<T>(acc[m][n][2 * h + 1]));
            a[m][n / 2][(n % 2) * 2 + h] = y;
            if (y_next) store_pair(y_next, WIDTH, row0 + rr, c, batch, y);
          }
    }
    if (s.out_act != Activation::None) {
      const T* w = weights_of(top);
      const LayerRows<T> rows = rows_of(top);
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
              forward_pair(rows, s.out_act, out_curved, pair_row(m, h), c0 + pair_col(n), round_to<T>(o[m][n][2 * h]),
                           round_to<T>(o[m][n][2 * h + 1]));
      }
    }

    // ---- Sweep 1, the backward from g: dz of every layer (the first half of its [dz; dZ2]); dY
    // act''(z) of the curved layers.
    {
      const T* w = weights_of(top);
      const LayerRows<T> rows = rows_of(top);
      T* dz = dz_of(top);
      zero(acc);
      for (int k0 = 0; k0 < out_w; k0 += 16) {
        uint32_t d[MT][1][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int rr = pair_row(m, i % 2);
            const int c = k0 + 2 * t + (i / 2) * 8;
            const float2 g = unpack2<T>(load_pair(args.dL_doutput, args.ld_dout, row0 + rr, c, batch));
            d[m][0][i] = first_sweep_pair(rows, s.out_act, out_curved, rr, c, g.x, g.y);
            if (dz) store_pair(dz, out_w, row0 + rr, c, batch, d[m][0][i]);
          }
        times_weights<T, MT, 1, NT / 2>(acc, d, 0, w, stride, k0, 0);
      }
    }
    for (int l = top - 1; l >= 0; --l) {
      const LayerRows<T> rows = rows_of(l);
      T* dz = dz_of(l);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int rr = pair_row(m, h), c = pair_col(n);
            const uint32_t v = first_sweep_pair(rows, s.act, hidden_curved, rr, c, round_to<T>(acc[m][n][2 * h]),
                                                round_to<T>(acc[m][n][2 * h + 1]));
            a[m][n / 2][(n % 2) * 2 + h] = v;
            if (dz) store_pair(dz, WIDTH, row0 + rr, c, batch, v);
          }
      if (l > 0) {
        const T* w = weights_of(l);
        zero(acc);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) times_weights<T, MT, KS, NT / 2>(acc, a, ks, w, stride, 16 * ks, 0);
      }
    }

    // ---- Sweep 2, from v up: bdz = a_{l-1} W_l^T; a_l = bdz act'(z_l) (the first half of the next
    // layer's [a; y]); bz_l = dY_l act''(z_l) bdz in slot 1; dL2/dg = the output layer's a.
    first_layer<T, WIDTH>(acc, args.dL_ddLdinput, args.ld_v, weights_of(0), s.in_width, row0, batch, x_of(0));
    for (int l = 0; l < top; ++l) {
      if (l > 0) {
        zero(acc);
        times_weights_transposed<T, MT, KS, NT / 2>(acc, a, weights_of(l), stride, 0);
      }
      const LayerRows<T> rows = rows_of(l);
      T* a_next = x_of(l + 1);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int rr = pair_row(m, h), c = pair_col(n);
            const float b0 = round_to<T>(acc[m][n][2 * h]), b1 = round_to<T>(acc[m][n][2 * h + 1]);
            float2 d1 = make_float2(1.0f, 1.0f);
            if (s.act != Activation::None) d1 = unpack2<T>(rows.get(0, rr, c));
            const uint32_t v = pack2<T>(b0 * d1.x, b1 * d1.y);
            a[m][n / 2][(n % 2) * 2 + h] = v;
            if (a_next) store_pair(a_next, WIDTH, row0 + rr, c, batch, v);
            if (hidden_curved) {
              const float2 cz = unpack2<T>(rows.get(1, rr, c));
              rows.put(1, rr, c, pack2<T>(cz.x * b0, cz.y * b1));
            }
          }
    }
    if (args.dL_ddLdoutput || out_curved) {
      const T* w = weights_of(top);
      const LayerRows<T> rows = rows_of(top);
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
              const int rr = pair_row(m, h), c = c0 + pair_col(n);
              const float b0 = round_to<T>(o[m][n][2 * h]), b1 = round_to<T>(o[m][n][2 * h + 1]);
              float2 d1 = make_float2(1.0f, 1.0f);
              if (s.out_act != Activation::None) d1 = unpack2<T>(rows.get(0, rr, c));
              if (args.dL_ddLdoutput)
                store_pair(args.dL_ddLdoutput, args.ld_ddout, row0 + rr, c, batch, pack2<T>(b0 * d1.x, b1 * d1.y));
              if (out_curved) {
                const float2 cz = unpack2<T>(rows.get(1, rr, c));
                rows.put(1, rr, c, pack2<T>(cz.x * b0, cz.y * b1));
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
      const LayerRows<T> rows = rows_of(top);
      T* dz = dz_of(top);
      zero(acc);
      for (int k0 = 0; k0 < out_w; k0 += 16) {
        uint32_t d[MT][1][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int rr = pair_row(m, i % 2);
            const int c = k0 + 2 * t + (i / 2) * 8;
            d[m][0][i] = rows.get(1, rr, c);
            if (dz) store_pair(dz + second_half * out_w, out_w, row0 + rr, c, batch, d[m][0][i]);
          }
        times_weights<T, MT, 1, NT / 2>(acc, d, 0, w, stride, k0, 0);
      }
      have_e = true;
    }
    for (int l = top - 1; l >= 0; --l) {
      const LayerRows<T> rows = rows_of(l);
      T* dz = dz_of(l);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int rr = pair_row(m, h), c = pair_col(n);
            float e0 = 0.0f, e1 = 0.0f, bz0 = 0.0f, bz1 = 0.0f;
            if (have_e) {
              e0 = round_to<T>(acc[m][n][2 * h]);
              e1 = round_to<T>(acc[m][n][2 * h + 1]);
              if (s.act != Activation::None) {
                const float2 d1 = unpack2<T>(rows.get(0, rr, c));
                e0 *= d1.x;
                e1 *= d1.y;
              }
            }
            if (hidden_curved) {
              const float2 bz = unpack2<T>(rows.get(1, rr, c));
              bz0 = bz.x;
              bz1 = bz.y;
            }
            const uint32_t v = pack2<T>(bz0 + e0, bz1 + e1);
            a[m][n / 2][(n % 2) * 2 + h] = v;
            if (dz) store_pair(dz + second_half * WIDTH, WIDTH, row0 + rr, c, batch, v);
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
                store_pair(args.dL_dinput, args.ld_din, row0 + pair_row(m, h), c0 + pair_col(n), batch,
                           pack2<T>(o[m][n][2 * h], o[m][n][2 * h + 1]));
        }
      }
    }
  }
}

template <typename T, int WIDTH>
GeneralKernel kernel_of(const FusedShape& shape) {
  const size_t warp_bytes = second_order_warp_state_bytes(shape, Tiling<WIDTH>::kRows, sizeof(T),
                                                          !activation_is_piecewise_linear(shape.act),
                                                          !activation_is_piecewise_linear(shape.out_act));
  return {reinterpret_cast<const void*>(fused_second_order_kernel<T, WIDTH>), Tiling<WIDTH>::kBlockRows,
          kWarpsPerBlock * warp_bytes};
}

template <typename T>
GeneralKernel kernel_by_width(const FusedShape& shape) {
  return with_hidden_width(shape.width, [&](auto width) { return kernel_of<T, decltype(width)::value>(shape); });
}

#endif  // !TINYFUSE_WITH_HIP

}  // namespace

FusedPlan plan_general_second_order(const PlanInputs& in) {
#if defined(TINYFUSE_WITH_HIP)
  (void)in;
  return FusedPlan{};  // the FP32 sweeps run instead
#else
  GeneralKernel k{};
  if (in.dtype == DType::F16) k = kernel_by_width<__half>(in.shape);
  else if (in.dtype == DType::BF16) k = kernel_by_width<__nv_bfloat16>(in.shape);
  else throw UnsupportedError("internal: fused MLP dtype " + to_string(in.dtype));
  // The warps' rows take at most half of a block's shared memory, so that the weights keep room
  // (a shape past that, deep and wide, runs the FP32 sweeps).
  if (k.extra_smem_bytes > in.device->max_smem_per_block / 2) return FusedPlan{};
  FusedPlan p;
  try {
    p = plan_general(k, in);
  } catch (const UnsupportedError&) {
    return FusedPlan{};  // a layer's weights and the rows do not fit together
  }
  p.kernel = FusedKernel::GeneralSecondOrder;
  return p;
#endif
}

}  // namespace tinyfuse::cuda::fused
