// The three second-order sweeps on the portable layer kernels, and the FP32 recomputation that
// lets the FP16 and library networks use them (mlp_second_order.h).
#include "cuda/mlp_second_order.h"

#include <algorithm>
#include <utility>

#include "core/activation_math.h"
#include "cuda/portable_layers.h"
#include "cuda/staging.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

// The elementwise steps of backward_backward_input (the CPU reference's three sweeps,
// src/cpu/mlp.cpp), one thread per element of a (rows x width) matrix; z null means the layer's
// activation is None (act' = 1, act'' = 0; z is not kept then).
//   sweep 1: dz = dy act'(z), c = dy act''(z)         (c null: the layer is piecewise linear)
//   sweep 2: c *= bdz, out = bdz act'(z)              (c, out each optional)
//   sweep 3: dZ = bz + e act'(z)                       (bz, e each optional)
__global__ void second_order_sweep1_kernel(const float* __restrict__ dy, int64_t ldy, const float* __restrict__ z,
                                           float* __restrict__ dz, float* __restrict__ c, int64_t rows, int width,
                                           Activation act) {
  const int n = blockIdx.x * 32 + threadIdx.x;
  if (n >= width) return;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * 8 + threadIdx.y; m < rows; m += static_cast<int64_t>(gridDim.y) * 8) {
    const int64_t i = m * width + n;
    const float g = dy[m * ldy + n], zz = z ? z[i] : 0.0f;
    dz[i] = z ? g * activate_derivative(act, zz) : g;
    if (c) c[i] = g * activate_second_derivative(act, zz);
  }
}

__global__ void second_order_sweep2_kernel(const float* __restrict__ bdz, const float* __restrict__ z, float* __restrict__ c,
                                           float* __restrict__ out, int64_t ldo, int64_t rows, int width, Activation act) {
  const int n = blockIdx.x * 32 + threadIdx.x;
  if (n >= width) return;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * 8 + threadIdx.y; m < rows; m += static_cast<int64_t>(gridDim.y) * 8) {
    const int64_t i = m * width + n;
    const float v = bdz[i];
    if (c) c[i] *= v;
    if (out) out[m * ldo + n] = z ? v * activate_derivative(act, z[i]) : v;
  }
}

__global__ void second_order_sweep3_kernel(const float* __restrict__ bz, const float* __restrict__ e,
                                           const float* __restrict__ z, float* __restrict__ dZ, int64_t rows, int width,
                                           Activation act) {
  const int n = blockIdx.x * 32 + threadIdx.x;
  if (n >= width) return;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * 8 + threadIdx.y; m < rows; m += static_cast<int64_t>(gridDim.y) * 8) {
    const int64_t i = m * width + n;
    float v = bz ? bz[i] : 0.0f;
    if (e) v += z ? e[i] * activate_derivative(act, z[i]) : e[i];
    dZ[i] = v;
  }
}

dim3 elementwise_grid(int64_t rows, uint32_t width) {
  return dim3((width + 31) / 32, static_cast<unsigned>(std::min<int64_t>((rows + 7) / 8, 65535)));
}


// dst (rows x cols, dense) = float(src) (rows ld apart).
template <typename T>
__global__ void widen_kernel(const T* __restrict__ src, int64_t ld, int64_t rows, uint32_t cols, float* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  dst[i] = to_float(src[r * ld + c]);
}

// dst (rows ld apart) = T(src) (rows x cols, dense).
template <typename T>
__global__ void narrow_kernel(const float* __restrict__ src, int64_t rows, uint32_t cols, T* __restrict__ dst, int64_t ld) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  dst[r * ld + c] = from_float<T>(src[i]);
}

// The parameter gradients in their dtype: written, or added to (in FP32, rounded once).
template <typename T>
__global__ void gradient_store_kernel(const float* __restrict__ g, int64_t n, T* __restrict__ out, bool accumulate) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = from_float<T>(accumulate ? to_float(out[i]) + g[i] : g[i]);
}

}  // namespace

void second_order_sweeps(const SecondOrderShape& net, const float* weights, const ForwardState& state,
                         const SecondOrderIo& io, float* grad, Stream stream_handle) {
  const int64_t batch = io.batch;
  if (batch == 0) return;
  const gpuStream_t stream = stream_of(stream_handle);
  const auto& layers = net.layers;
  const size_t L = layers.size();
  const bool param_grads = grad != nullptr;
  auto curved = [&](size_t li) { return !activation_is_piecewise_linear(net.activation(li)); };
  auto x_of = [&](size_t li) -> std::pair<const float*, int64_t> {
    if (li == 0) return {io.x, io.ldx};
    return {state.y[li - 1], static_cast<int64_t>(layers[li].in)};
  };

  // Scratch: dz (and c where curved) of every layer, three layer-wide work arrays, the partials.
  Carver carve;
  std::vector<size_t> dz_at(L), c_at(L, kNone);
  // Sweep 2 adds weight gradients only, sweep 3 weights and biases: each its own split.
  std::vector<GradSplit> weight_splits(L), splits(L);
  size_t widest = 0, partial_floats = 0;
  for (size_t li = 0; li < L; ++li) {
    const auto& l = layers[li];
    dz_at[li] = carve.take(static_cast<size_t>(batch) * l.out);
    if (curved(li)) c_at[li] = carve.take(static_cast<size_t>(batch) * l.out);
    widest = std::max<size_t>(widest, std::max(l.in, l.out));
    if (param_grads) {
      weight_splits[li] = grad_split(batch, l.in, l.out, false);
      splits[li] = grad_split(batch, l.in, l.out, net.biases);
      partial_floats = std::max({partial_floats, weight_splits[li].partial_floats(), splits[li].partial_floats()});
    }
  }
  const size_t work_at[3] = {carve.take(static_cast<size_t>(batch) * widest), carve.take(static_cast<size_t>(batch) * widest),
                             carve.take(static_cast<size_t>(batch) * widest)};
  const size_t partial_at = carve.take(partial_floats);
  Buffer scratch = Buffer::on_stream(Device::CUDA, carve.bytes(), stream_handle);
  float* base = static_cast<float*>(scratch.data());
  float* work[3] = {base + work_at[0], base + work_at[1], base + work_at[2]};
  auto c_of = [&](size_t li) { return c_at[li] == kNone ? nullptr : base + c_at[li]; };

  // Sweep 1: backward()'s dz per layer, and c where act'' is not 0.
  {
    const float* dy = io.g;
    int64_t ldy = io.ldg;
    int cur = 0;
    for (size_t li = L; li-- > 0;) {
      const auto& l = layers[li];
      second_order_sweep1_kernel<<<elementwise_grid(batch, l.out), dim3(32, 8), 0, stream>>>(
          dy, ldy, state.z[li], base + dz_at[li], c_of(li), batch, static_cast<int>(l.out), net.activation(li));
      TF_GPU_CHECK_LAUNCH("MLP second order (sweep 1)");
      if (li == 0) break;
      launch_input_grad(Activation::None, base + dz_at[li], l.out, weights + l.weight_offset, batch, l.in, l.out, nullptr,
                        work[cur], l.in, stream);
      dy = work[cur];
      ldy = l.in;
      cur ^= 1;
    }
  }

  // Sweep 2: adjoints of backward() from the input up; c of each curved layer becomes its bz.
  {
    const float* a = io.v;
    int64_t lda = io.ldv;
    int cur = 0;
    for (size_t li = 0; li < L; ++li) {
      const auto& l = layers[li];
      float* bdz = work[2];
      launch_forward(Activation::None, a, lda, weights + l.weight_offset, nullptr, batch, l.in, l.out, nullptr, nullptr, bdz,
                     l.out, stream);
      if (param_grads)
        launch_weight_grad(weight_splits[li], base + dz_at[li], l.out, a, lda, batch, l.in, l.out, false,
                           grad + l.weight_offset, true, base + partial_at, stream);
      const bool top = li + 1 == L;
      if (top && !io.ddy && !curved(li)) break;
      float* out = nullptr;
      int64_t ldo = l.out;
      if (top && io.ddy) {
        out = io.ddy;
        ldo = io.ldddy;
      } else if (!top) {
        out = work[cur];
      }
      second_order_sweep2_kernel<<<elementwise_grid(batch, l.out), dim3(32, 8), 0, stream>>>(
          bdz, state.z[li], c_of(li), out, ldo, batch, static_cast<int>(l.out), net.activation(li));
      TF_GPU_CHECK_LAUNCH("MLP second order (sweep 2)");
      a = out;
      lda = ldo;
      cur ^= 1;
    }
  }

  // Sweep 3: bz through the forward pass, from the topmost curved layer down (nothing flows
  // above it: those layers' biases get no second-order gradient).
  size_t n_flowing = 0;
  for (size_t li = 0; li < L; ++li)
    if (curved(li)) n_flowing = li + 1;
  if (n_flowing == 0) {
    if (io.d2x)
      TF_GPU_CHECK(gpuMemset2DAsync(io.d2x, io.ldd2x * sizeof(float), 0, layers[0].in * sizeof(float), batch, stream));
    return;
  }
  const float* e = nullptr;
  int cur = 0;
  for (size_t li = n_flowing; li-- > 0;) {
    const auto& l = layers[li];
    float* dZ = work[2];
    second_order_sweep3_kernel<<<elementwise_grid(batch, l.out), dim3(32, 8), 0, stream>>>(
        c_of(li), e, state.z[li], dZ, batch, static_cast<int>(l.out), net.activation(li));
    TF_GPU_CHECK_LAUNCH("MLP second order (sweep 3)");
    if (param_grads) {
      const auto [x_prev, ldx] = x_of(li);
      launch_weight_grad(splits[li], dZ, l.out, x_prev, ldx, batch, l.in, l.out, net.biases, grad + l.weight_offset, true,
                         base + partial_at, stream);
    }
    if (li > 0) {
      launch_input_grad(Activation::None, dZ, l.out, weights + l.weight_offset, batch, l.in, l.out, nullptr, work[cur], l.in,
                        stream);
      e = work[cur];
      cur ^= 1;
    } else if (io.d2x) {
      launch_input_grad(Activation::None, dZ, l.out, weights + l.weight_offset, batch, l.in, l.out, nullptr, io.d2x, io.ldd2x,
                        stream);
    }
  }
}

template <typename T>
void recomputed_second_order(const SecondOrderShape& net, size_t n_params, const T* weights, T* gradients,
                             const TensorView& input, const TensorView& dL_ddLdinput, const TensorView& dL_doutput,
                             const TensorView* dL_ddLdoutput, const TensorView* dL_dinput, GradientMode mode) {
  const int64_t batch = input.rows();
  const gpuStream_t stream = stream_of(input);
  const bool param_grads = mode != GradientMode::Ignore && gradients && n_params > 0;
  if (batch == 0) {
    if (mode == GradientMode::Overwrite && gradients && n_params > 0)
      TF_GPU_CHECK(gpuMemsetAsync(gradients, 0, n_params * sizeof(T), stream));
    return;
  }
  const auto& layers = net.layers;
  const size_t L = layers.size();
  const uint32_t in_w = layers.front().in, out_w = layers.back().out;
  const size_t rows = static_cast<size_t>(batch);

  Carver carve;
  const size_t w_at = carve.take(n_params), x_at = carve.take(rows * in_w), v_at = carve.take(rows * in_w),
               g_at = carve.take(rows * out_w);
  const size_t ddy_at = dL_ddLdoutput ? carve.take(rows * out_w) : kNone;
  const size_t d2x_at = dL_dinput ? carve.take(rows * in_w) : kNone;
  const size_t grad_at = param_grads ? carve.take(n_params) : kNone;
  std::vector<size_t> z_at(L, kNone), y_at(L, kNone);
  for (size_t li = 0; li < L; ++li) {
    if (net.activation(li) != Activation::None) z_at[li] = carve.take(rows * layers[li].out);
    if (li + 1 < L) y_at[li] = carve.take(rows * layers[li].out);
  }
  Buffer scratch = Buffer::on_stream(Device::CUDA, carve.bytes(), input.stream);
  float* base = static_cast<float*>(scratch.data());
  auto at = [&](size_t offset) { return offset == kNone ? nullptr : base + offset; };

  widen_kernel<T><<<blocks_for(static_cast<int64_t>(n_params)), kThreadsPerBlock, 0, stream>>>(
      weights, 1, static_cast<int64_t>(n_params), 1, at(w_at));
  widen_kernel<T><<<blocks_for(batch * in_w), kThreadsPerBlock, 0, stream>>>(static_cast<const T*>(input.data), input.strides[0], batch, in_w,
                                                                             at(x_at));
  widen_kernel<T><<<blocks_for(batch * in_w), kThreadsPerBlock, 0, stream>>>(
      static_cast<const T*>(dL_ddLdinput.data), dL_ddLdinput.strides[0], batch, in_w, at(v_at));
  widen_kernel<T><<<blocks_for(batch * out_w), kThreadsPerBlock, 0, stream>>>(
      static_cast<const T*>(dL_doutput.data), dL_doutput.strides[0], batch, out_w, at(g_at));
  TF_GPU_CHECK_LAUNCH("MLP second order (widen operands)");

  // The FP32 forward pass, keeping what the sweeps read.
  const float* w32 = at(w_at);
  ForwardState state;
  state.z.assign(L, nullptr);
  state.y.assign(L, nullptr);
  const float* x = at(x_at);
  int64_t ldx = in_w;
  for (size_t li = 0; li < L; ++li) {
    const auto& l = layers[li];
    float* z = at(z_at[li]);
    float* y = at(y_at[li]);
    launch_forward(net.activation(li), x, ldx, w32 + l.weight_offset, net.biases ? w32 + l.bias_offset : nullptr, batch, l.in,
                   l.out, z, y, nullptr, 0, stream);
    state.z[li] = z;
    state.y[li] = y;
    x = y;
    ldx = l.out;
  }

  float* grad32 = at(grad_at);
  if (grad32) TF_GPU_CHECK(gpuMemsetAsync(grad32, 0, n_params * sizeof(float), stream));
  SecondOrderIo io;
  io.batch = batch;
  io.x = at(x_at), io.ldx = in_w;
  io.v = at(v_at), io.ldv = in_w;
  io.g = at(g_at), io.ldg = out_w;
  io.ddy = at(ddy_at), io.ldddy = out_w;
  io.d2x = at(d2x_at), io.ldd2x = in_w;
  second_order_sweeps(net, w32, state, io, grad32, input.stream);

  if (dL_ddLdoutput)
    narrow_kernel<T><<<blocks_for(batch * out_w), kThreadsPerBlock, 0, stream>>>(
        io.ddy, batch, out_w, static_cast<T*>(dL_ddLdoutput->data), dL_ddLdoutput->strides[0]);
  if (dL_dinput)
    narrow_kernel<T><<<blocks_for(batch * in_w), kThreadsPerBlock, 0, stream>>>(io.d2x, batch, in_w, static_cast<T*>(dL_dinput->data),
                                                                              dL_dinput->strides[0]);
  if (grad32)
    gradient_store_kernel<T><<<blocks_for(static_cast<int64_t>(n_params)), kThreadsPerBlock, 0, stream>>>(
        grad32, static_cast<int64_t>(n_params), gradients, mode == GradientMode::Accumulate);
  TF_GPU_CHECK_LAUNCH("MLP second order (store results)");
}

template void recomputed_second_order<float>(const SecondOrderShape&, size_t, const float*, float*, const TensorView&,
                                             const TensorView&, const TensorView&, const TensorView*, const TensorView*,
                                             GradientMode);
template void recomputed_second_order<__half>(const SecondOrderShape&, size_t, const __half*, __half*, const TensorView&,
                                              const TensorView&, const TensorView&, const TensorView*, const TensorView*,
                                              GradientMode);

template void recomputed_second_order<__nv_bfloat16>(const SecondOrderShape&, size_t, const __nv_bfloat16*, __nv_bfloat16*,
                                                     const TensorView&, const TensorView&, const TensorView&,
                                                     const TensorView*, const TensorView*, GradientMode);

}  // namespace tinyfuse::cuda
