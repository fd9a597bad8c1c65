// PortableMLP on CUDA/HIP: plain FP32 kernels (src/cuda/portable_gemm.cuh), no vendor library.
// Same parameter layout, semantics, checks and error messages as the CPU reference (src/cpu/mlp.cpp).
//
// Per layer l (y_{-1} = input, act = hidden activation, or the output activation for the last):
//   forward   z_l = y_{l-1} W_l^T + b_l, y_l = act(z_l)         one GEMM, bias and activation fused
//   backward  dW_l (+)= dz_l^T y_{l-1}, db_l (+)= dz_l^T 1      chunked over the batch + fixed-order sum
//             dz_{l-1} = (dz_l W_l) * act'(z_{l-1})            one GEMM, act' fused
// with dz_L = dL/doutput * act_out'(z_L) (an elementwise kernel; dL/doutput itself for None).
// Only what backward() needs is kept: z_l when act' depends on it (not for None), y_l for hidden
// layers (the next layer's input; y = z for None). All work is queued on the input's stream;
// scratch memory comes from the stream-ordered pool; nothing synchronises the host.
#include "cuda/portable_mlp.h"

#include <algorithm>
#include <utility>
#include <type_traits>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/gpu_mlp.h"
#include "cuda/portable_gemm.cuh"
#include "cuda/staging.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

using pgemm::Epilogue;

// Row-major (batch x features) operands: 128 batch rows x 64 features per block, 8x4 per thread.
constexpr int kRowBM = 128, kRowBN = 64, kRowBK = 16, kRowTM = 8, kRowTN = 4;
// Weight gradients: a 64 x 64 tile of dW per block, 4x4 per thread, the batch split in chunks.
constexpr int kGradBM = 64, kGradBN = 64, kGradBK = 16, kGradTM = 4, kGradTN = 4;

// Weight-gradient chunking, a function of the shapes only (never of the device), so results are
// reproducible everywhere: about kGradTargetBlocks blocks, chunks of at least kGradMinChunk rows,
// partial sums of at most kGradMaxPartial floats.
constexpr int64_t kGradTargetBlocks = 512;
constexpr int64_t kGradMinChunk = 128;
constexpr int64_t kGradMaxPartial = int64_t(1) << 25;  // 128 MiB

// Calls f(std::integral_constant<Activation, a>) for a runtime activation a.
template <typename F>
void with_activation(Activation a, F&& f) {
  using A = Activation;
  switch (a) {
    case A::None: f(std::integral_constant<A, A::None>{}); return;
    case A::ReLU: f(std::integral_constant<A, A::ReLU>{}); return;
    case A::LeakyReLU: f(std::integral_constant<A, A::LeakyReLU>{}); return;
    case A::SiLU: f(std::integral_constant<A, A::SiLU>{}); return;
    case A::Exponential: f(std::integral_constant<A, A::Exponential>{}); return;
    case A::Sine: f(std::integral_constant<A, A::Sine>{}); return;
    case A::Sigmoid: f(std::integral_constant<A, A::Sigmoid>{}); return;
    case A::Squareplus: f(std::integral_constant<A, A::Squareplus>{}); return;
    case A::Softplus: f(std::integral_constant<A, A::Softplus>{}); return;
    case A::Tanh: f(std::integral_constant<A, A::Tanh>{}); return;
  }
  throw Error("internal: unknown activation");
}

dim3 row_grid(int64_t rows, int64_t cols) {
  return dim3(static_cast<unsigned>((rows + kRowBM - 1) / kRowBM), static_cast<unsigned>((cols + kRowBN - 1) / kRowBN), 1);
}

// Z = X W^T + b, Y = act(Z), out = act(Z) (Z, Y, out each optional). X: rows x in (stride ldx).
void launch_forward(Activation act, const float* x, int64_t ldx, const float* w, const float* bias, int64_t rows,
                    uint32_t in, uint32_t out_w, float* z, float* y, float* out, int64_t ldo, gpuStream_t stream) {
  if (rows == 0 || (!z && !y && !out)) return;
  pgemm::Params p;
  p.A = x;
  p.lda = ldx;
  p.B = w;
  p.ldb = in;
  p.M = rows;
  p.N = out_w;
  p.K = in;
  p.k_chunk = in;
  p.bias = bias;
  p.Z = z;
  p.ldz = out_w;
  p.Y = y;
  p.ldy = out_w;
  p.out = out;
  p.ldo = ldo;
  with_activation(act, [&](auto a) {
    pgemm::gemm_kernel<kRowBM, kRowBN, kRowBK, kRowTM, kRowTN, true, true, true, Epilogue::Forward, decltype(a)::value>
        <<<row_grid(rows, out_w), pgemm::kThreads, 0, stream>>>(p);
    TF_GPU_CHECK_LAUNCH("PortableMLP forward GEMM");
  });
}

// C = (dZ W) * act'(zprev): dZ rows x out_w (stride lddz), W out_w x in, C rows x in (stride ldc),
// zprev rows x in dense (read unless act is None).
void launch_input_grad(Activation act, const float* dz, int64_t lddz, const float* w, int64_t rows, uint32_t in,
                       uint32_t out_w, const float* zprev, float* c, int64_t ldc, gpuStream_t stream) {
  if (rows == 0) return;
  pgemm::Params p;
  p.A = dz;
  p.lda = lddz;
  p.B = w;
  p.ldb = in;
  p.M = rows;
  p.N = in;
  p.K = out_w;
  p.k_chunk = out_w;
  p.zprev = zprev;
  p.ldzp = in;
  p.C = c;
  p.ldc = ldc;
  with_activation(act, [&](auto a) {
    pgemm::gemm_kernel<kRowBM, kRowBN, kRowBK, kRowTM, kRowTN, true, false, true, Epilogue::InputGrad, decltype(a)::value>
        <<<row_grid(rows, in), pgemm::kThreads, 0, stream>>>(p);
    TF_GPU_CHECK_LAUNCH("PortableMLP input-gradient GEMM");
  });
}

// How a layer's weight gradient is split over the batch.
struct GradSplit {
  int64_t chunk_rows = 0;
  int n_chunks = 1;
  int64_t count = 0;  // floats per chunk partial: out*in weights (+ out biases)
  size_t partial_floats() const { return n_chunks > 1 ? static_cast<size_t>(n_chunks) * count : 0; }
};

GradSplit grad_split(int64_t batch, uint32_t in, uint32_t out_w, bool biases) {
  GradSplit s;
  s.count = static_cast<int64_t>(out_w) * in + (biases ? out_w : 0);
  const int64_t tiles = ((out_w + kGradBM - 1) / kGradBM) * ((in + kGradBN - 1) / kGradBN);
  int64_t n = (kGradTargetBlocks + tiles - 1) / tiles;
  n = std::min(n, (batch + kGradMinChunk - 1) / kGradMinChunk);
  n = std::min(n, kGradMaxPartial / s.count);
  n = std::max<int64_t>(n, 1);
  s.chunk_rows = next_multiple<int64_t>((batch + n - 1) / n, kGradBK);
  s.n_chunks = static_cast<int>((batch + s.chunk_rows - 1) / s.chunk_rows);
  return s;
}

// grad[0 .. out*in) (+)= dZ^T X and, with biases, grad[out*in .. + out) (+)= dZ^T 1.
// dZ: rows x out_w (stride lddz); X: rows x in (stride ldx); partial: split.partial_floats() floats.
void launch_weight_grad(const GradSplit& split, const float* dz, int64_t lddz, const float* x, int64_t ldx, int64_t rows,
                        uint32_t in, uint32_t out_w, bool biases, float* grad, bool accumulate, float* partial,
                        gpuStream_t stream) {
  const int64_t n_weights = static_cast<int64_t>(out_w) * in;
  const bool direct = split.n_chunks == 1;
  float* dst = direct ? grad : partial;
  pgemm::Params p;
  p.A = dz;
  p.lda = lddz;
  p.B = x;
  p.ldb = ldx;
  p.M = out_w;
  p.N = in;
  p.K = rows;
  p.k_chunk = split.chunk_rows;
  p.C = dst;
  p.ldc = in;
  p.Cb = biases ? dst + n_weights : nullptr;
  p.chunk_stride = direct ? 0 : split.count;
  p.accumulate = direct && accumulate;
  const dim3 grid(static_cast<unsigned>((out_w + kGradBM - 1) / kGradBM), static_cast<unsigned>((in + kGradBN - 1) / kGradBN),
                  static_cast<unsigned>(split.n_chunks));
  pgemm::gemm_kernel<kGradBM, kGradBN, kGradBK, kGradTM, kGradTN, false, false, false, Epilogue::WeightGrad, Activation::None>
      <<<grid, pgemm::kThreads, 0, stream>>>(p);
  TF_GPU_CHECK_LAUNCH("PortableMLP weight-gradient GEMM");
  if (direct) return;
  pgemm::reduce_chunks_kernel<<<static_cast<unsigned>((split.count + 31) / 32), dim3(32, 8), 0, stream>>>(
      partial, split.count, split.n_chunks, grad, accumulate);
  TF_GPU_CHECK_LAUNCH("PortableMLP gradient chunk sum");
}

void launch_output_delta(Activation act, const float* dy, int64_t ldy, const float* z, float* dz, int64_t rows,
                         uint32_t width, gpuStream_t stream) {
  if (rows == 0) return;
  const int64_t row_blocks = std::min<int64_t>((rows + 7) / 8, 65535);
  pgemm::output_delta_kernel<<<dim3((width + 31) / 32, static_cast<unsigned>(row_blocks)), dim3(32, 8), 0, stream>>>(
      dy, ldy, z, dz, rows, static_cast<int>(width), act);
  TF_GPU_CHECK_LAUNCH("PortableMLP output delta");
}

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

// Offsets (in floats) of arrays carved out of one scratch buffer, each kScratchAlignment aligned.
class Carver {
 public:
  size_t take(size_t floats) {
    const size_t at = total_;
    total_ += scratch_bytes(floats * sizeof(float)) / sizeof(float);
    return at;
  }
  size_t bytes() const { return total_ * sizeof(float); }

 private:
  size_t total_ = 0;
};

constexpr size_t kNone = ~size_t(0);

struct PortableMlpContext : Context {
  int64_t batch = 0;
  Buffer memory;  // device scratch on the input's stream
  // Per layer: offsets into `memory` of z (kNone when act' does not need it) and of y (hidden
  // layers; for act None y is z's value and only y is kept).
  std::vector<size_t> z, y;
  const float* at(size_t offset) const { return static_cast<const float*>(memory.data()) + offset; }
  float* at(size_t offset) { return static_cast<float*>(memory.data()) + offset; }
};


class PortableMlp final : public GpuMlp<float> {
 public:
  using GpuMlp<float>::GpuMlp;

  void inference(const TensorView& input, const TensorView& output) override {
    check_io(input, &output);
    const int64_t batch = input.rows();
    if (batch == 0) return;
    const gpuStream_t stream = stream_of(input);
    // Hidden activations ping-pong between two scratch arrays; the last layer writes `output`.
    Carver carve;
    const size_t hidden = static_cast<size_t>(batch) * spec_.n_neurons;
    const size_t ping = spec_.n_hidden_layers > 0 ? carve.take(hidden) : 0;
    const size_t pong = spec_.n_hidden_layers > 1 ? carve.take(hidden) : ping;
    Buffer scratch = Buffer::on_stream(Device::CUDA, carve.bytes(), input.stream);
    float* base = static_cast<float*>(scratch.data());
    const float* x = input.ptr<float>();
    int64_t ldx = input.strides[0];
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& l = layers_[li];
      const bool last = li + 1 == layers_.size();
      const float* bias = spec_.biases ? inference_params_ + l.bias_offset : nullptr;
      if (last) {
        launch_forward(spec_.output_activation, x, ldx, inference_params_ + l.weight_offset, bias, batch, l.in, l.out,
                       nullptr, nullptr, output.ptr<float>(), output.strides[0], stream);
      } else {
        float* y = base + (li % 2 == 0 ? ping : pong);
        launch_forward(spec_.activation, x, ldx, inference_params_ + l.weight_offset, bias, batch, l.in, l.out, nullptr, y,
                       nullptr, 0, stream);
        x = y;
        ldx = l.out;
      }
    }
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool /*prepare_input_gradients*/) override {
    check_io(input, output);
    const int64_t batch = input.rows();
    auto ctx = std::make_unique<PortableMlpContext>();
    ctx->batch = batch;
    ctx->z.assign(layers_.size(), kNone);
    ctx->y.assign(layers_.size(), kNone);
    Carver carve;
    for (size_t li = 0; li < layers_.size(); ++li) {
      const size_t n = static_cast<size_t>(batch) * layers_[li].out;
      if (layer_activation(li) != Activation::None) ctx->z[li] = carve.take(n);
      if (li + 1 < layers_.size()) ctx->y[li] = carve.take(n);
    }
    if (batch == 0) return ctx;
    const gpuStream_t stream = stream_of(input);
    ctx->memory = Buffer::on_stream(Device::CUDA, carve.bytes(), input.stream);
    const float* weights = weights_for(use_inference_params);
    const float* x = input.ptr<float>();
    int64_t ldx = input.strides[0];
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Layer& l = layers_[li];
      const bool last = li + 1 == layers_.size();
      float* z = ctx->z[li] == kNone ? nullptr : ctx->at(ctx->z[li]);
      float* y = ctx->y[li] == kNone ? nullptr : ctx->at(ctx->y[li]);
      float* out = last && output ? output->ptr<float>() : nullptr;
      // Nothing to write (last layer, act None, no output) skips the launch.
      launch_forward(layer_activation(li), x, ldx, weights + l.weight_offset, spec_.biases ? weights + l.bias_offset : nullptr,
                     batch, l.in, l.out, z, y, out, last && output ? output->strides[0] : 0, stream);
      x = y;
      ldx = l.out;
    }
    return ctx;
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& /*output*/,
                const TensorView& dL_doutput, const TensorView* dL_dinput, bool use_inference_params,
                GradientMode mode) override {
    const auto* ctx = dynamic_cast<const PortableMlpContext*>(&base_ctx);
    if (!ctx) throw Error(name() + "::backward: context does not come from this network's forward()");
    check_backward(input, dL_doutput, dL_dinput, mode,
                   [&](int64_t batch) { return ctx->z.size() == layers_.size() && ctx->batch == batch; });
    const int64_t batch = input.rows();
    const gpuStream_t stream = stream_of(input);
    if (batch == 0) {
      if (mode == GradientMode::Overwrite && n_params_ > 0)
        TF_GPU_CHECK(gpuMemsetAsync(gradients_, 0, n_params_ * sizeof(float), stream));
      return;
    }
    const float* weights = weights_for(use_inference_params);
    const bool param_grads = mode != GradientMode::Ignore;
    const bool accumulate = mode == GradientMode::Accumulate;

    // Scratch: two dz arrays (dz of one layer is made while the next one's is read) and the
    // weight-gradient partial sums (reused layer after layer: work on one stream is ordered).
    const size_t L = layers_.size();
    const bool out_delta = spec_.output_activation != Activation::None;
    size_t dz_floats = 0, partial_floats = 0;
    std::vector<GradSplit> splits(L);
    for (size_t li = 0; li < L; ++li) {
      const Layer& l = layers_[li];
      if (li + 1 < L || out_delta) dz_floats = std::max(dz_floats, static_cast<size_t>(batch) * l.out);
      if (param_grads) {
        splits[li] = grad_split(batch, l.in, l.out, spec_.biases);
        partial_floats = std::max(partial_floats, splits[li].partial_floats());
      }
    }
    Carver carve;
    const size_t dz_at[2] = {carve.take(dz_floats), carve.take(L > 1 ? dz_floats : 0)};
    const size_t partial_at = carve.take(partial_floats);
    Buffer scratch = Buffer::on_stream(Device::CUDA, carve.bytes(), input.stream);
    float* base = static_cast<float*>(scratch.data());

    // dz of the current layer: dL/doutput itself (strided) when the output activation is None.
    const float* dz;
    int64_t lddz;
    int cur = 0;
    {
      const Layer& l = layers_[L - 1];
      if (out_delta) {
        launch_output_delta(spec_.output_activation, dL_doutput.ptr<float>(), dL_doutput.strides[0], ctx->at(ctx->z[L - 1]),
                            base + dz_at[cur], batch, l.out, stream);
        dz = base + dz_at[cur];
        lddz = l.out;
      } else {
        dz = dL_doutput.ptr<float>();
        lddz = dL_doutput.strides[0];
      }
    }
    for (size_t li = L; li-- > 0;) {
      const Layer& l = layers_[li];
      const float* x_prev = li == 0 ? input.ptr<float>() : ctx->at(ctx->y[li - 1]);
      const int64_t ldx = li == 0 ? input.strides[0] : l.in;
      if (param_grads)
        launch_weight_grad(splits[li], dz, lddz, x_prev, ldx, batch, l.in, l.out, spec_.biases, gradients_ + l.weight_offset,
                           accumulate, base + partial_at, stream);
      if (li > 0) {
        // dz of layer li-1 = (dz W) * act'(z_{li-1}) (z not kept, and not needed, for None).
        float* next = base + dz_at[cur ^ 1];
        const float* zprev = ctx->z[li - 1] == kNone ? nullptr : ctx->at(ctx->z[li - 1]);
        launch_input_grad(spec_.activation, dz, lddz, weights + l.weight_offset, batch, l.in, l.out, zprev, next, l.in,
                          stream);
        cur ^= 1;
        dz = next;
        lddz = l.in;
      } else if (dL_dinput) {
        launch_input_grad(Activation::None, dz, lddz, weights + l.weight_offset, batch, l.in, l.out, nullptr,
                          dL_dinput->ptr<float>(), dL_dinput->strides[0], stream);
      }
    }
  }

  // The derivative of backward()'s dL/dinput: the CPU reference's three sweeps (src/cpu/mlp.cpp)
  // with this network's GEMMs. Parameter gradients are summed in the order the sweeps produce
  // them (Overwrite clears them first), so results agree with the CPU to FP32 rounding.
  void backward_backward_input(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    const auto* ctx = dynamic_cast<const PortableMlpContext*>(&base_ctx);
    if (!ctx) throw Error(name() + "::backward_backward_input: context does not come from this network's forward()");
    check_backward_backward(input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, mode,
                            [&](int64_t batch) { return ctx->z.size() == layers_.size() && ctx->batch == batch; });
    const int64_t batch = input.rows();
    const gpuStream_t stream = stream_of(input);
    const bool param_grads = mode != GradientMode::Ignore;
    if (mode == GradientMode::Overwrite && n_params_ > 0)
      TF_GPU_CHECK(gpuMemsetAsync(gradients_, 0, n_params_ * sizeof(float), stream));
    if (batch == 0) return;
    const float* weights = weights_for(use_inference_params);
    const size_t L = layers_.size();
    auto curved = [&](size_t li) { return !activation_is_piecewise_linear(layer_activation(li)); };
    auto z_of = [&](size_t li) -> const float* { return ctx->z[li] == kNone ? nullptr : ctx->at(ctx->z[li]); };
    auto x_of = [&](size_t li) -> std::pair<const float*, int64_t> {
      if (li == 0) return {input.ptr<float>(), input.strides[0]};
      return {ctx->at(ctx->y[li - 1]), static_cast<int64_t>(layers_[li].in)};
    };

    // Scratch: dz (and c where curved) of every layer, three layer-wide work arrays, the partials.
    Carver carve;
    std::vector<size_t> dz_at(L), c_at(L, kNone);
    // Sweep 2 adds weight gradients only, sweep 3 weights and biases: each its own split.
    std::vector<GradSplit> weight_splits(L), splits(L);
    size_t widest = 0, partial_floats = 0;
    for (size_t li = 0; li < L; ++li) {
      const Layer& l = layers_[li];
      dz_at[li] = carve.take(static_cast<size_t>(batch) * l.out);
      if (curved(li)) c_at[li] = carve.take(static_cast<size_t>(batch) * l.out);
      widest = std::max<size_t>(widest, std::max(l.in, l.out));
      if (param_grads) {
        weight_splits[li] = grad_split(batch, l.in, l.out, false);
        splits[li] = grad_split(batch, l.in, l.out, spec_.biases);
        partial_floats = std::max({partial_floats, weight_splits[li].partial_floats(), splits[li].partial_floats()});
      }
    }
    const size_t work_at[3] = {carve.take(static_cast<size_t>(batch) * widest), carve.take(static_cast<size_t>(batch) * widest),
                               carve.take(static_cast<size_t>(batch) * widest)};
    const size_t partial_at = carve.take(partial_floats);
    Buffer scratch = Buffer::on_stream(Device::CUDA, carve.bytes(), input.stream);
    float* base = static_cast<float*>(scratch.data());
    float* work[3] = {base + work_at[0], base + work_at[1], base + work_at[2]};
    auto c_of = [&](size_t li) { return c_at[li] == kNone ? nullptr : base + c_at[li]; };

    // Sweep 1: backward()'s dz per layer, and c where act'' is not 0.
    {
      const float* dy = dL_doutput.ptr<float>();
      int64_t ldy = dL_doutput.strides[0];
      int cur = 0;
      for (size_t li = L; li-- > 0;) {
        const Layer& l = layers_[li];
        second_order_sweep1_kernel<<<elementwise_grid(batch, l.out), dim3(32, 8), 0, stream>>>(
            dy, ldy, z_of(li), base + dz_at[li], c_of(li), batch, static_cast<int>(l.out), layer_activation(li));
        TF_GPU_CHECK_LAUNCH("PortableMLP second order (sweep 1)");
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
      const float* a = dL_ddLdinput.ptr<float>();
      int64_t lda = dL_ddLdinput.strides[0];
      int cur = 0;
      for (size_t li = 0; li < L; ++li) {
        const Layer& l = layers_[li];
        float* bdz = work[2];
        launch_forward(Activation::None, a, lda, weights + l.weight_offset, nullptr, batch, l.in, l.out, nullptr, nullptr, bdz,
                       l.out, stream);
        if (param_grads)
          launch_weight_grad(weight_splits[li], base + dz_at[li], l.out, a, lda, batch, l.in, l.out, false,
                             gradients_ + l.weight_offset, true, base + partial_at, stream);
        const bool top = li + 1 == L;
        if (top && !dL_ddLdoutput && !curved(li)) break;
        float* out = nullptr;
        int64_t ldo = l.out;
        if (top && dL_ddLdoutput) {
          out = dL_ddLdoutput->ptr<float>();
          ldo = dL_ddLdoutput->strides[0];
        } else if (!top) {
          out = work[cur];
        }
        second_order_sweep2_kernel<<<elementwise_grid(batch, l.out), dim3(32, 8), 0, stream>>>(
            bdz, z_of(li), c_of(li), out, ldo, batch, static_cast<int>(l.out), layer_activation(li));
        TF_GPU_CHECK_LAUNCH("PortableMLP second order (sweep 2)");
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
      if (dL_dinput)
        TF_GPU_CHECK(gpuMemset2DAsync(dL_dinput->data, dL_dinput->strides[0] * sizeof(float), 0,
                                      layers_[0].in * sizeof(float), batch, stream));
      return;
    }
    const float* e = nullptr;
    int cur = 0;
    for (size_t li = n_flowing; li-- > 0;) {
      const Layer& l = layers_[li];
      float* dZ = work[2];
      second_order_sweep3_kernel<<<elementwise_grid(batch, l.out), dim3(32, 8), 0, stream>>>(
          c_of(li), e, z_of(li), dZ, batch, static_cast<int>(l.out), layer_activation(li));
      TF_GPU_CHECK_LAUNCH("PortableMLP second order (sweep 3)");
      if (param_grads) {
        const auto [x_prev, ldx] = x_of(li);
        launch_weight_grad(splits[li], dZ, l.out, x_prev, ldx, batch, l.in, l.out, spec_.biases, gradients_ + l.weight_offset,
                           true, base + partial_at, stream);
      }
      if (li > 0) {
        launch_input_grad(Activation::None, dZ, l.out, weights + l.weight_offset, batch, l.in, l.out, nullptr, work[cur], l.in,
                          stream);
        e = work[cur];
        cur ^= 1;
      } else if (dL_dinput) {
        launch_input_grad(Activation::None, dZ, l.out, weights + l.weight_offset, batch, l.in, l.out, nullptr,
                          dL_dinput->ptr<float>(), dL_dinput->strides[0], stream);
      }
    }
  }
};

}  // namespace

std::unique_ptr<Network> make_portable_mlp(const MlpSpec& spec, json hyperparams) {
  return std::make_unique<PortableMlp>(spec, std::move(hyperparams));
}

}  // namespace tinyfuse::cuda
