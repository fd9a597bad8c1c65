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
#include "cuda/mlp_second_order.h"
#include "cuda/portable_layers.h"
#include "cuda/staging.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

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

  // The derivative of backward()'s dL/dinput: the shared sweeps (mlp_second_order.h) on the
  // activations forward() kept. Parameter gradients are summed in the order the sweeps produce
  // them (Overwrite clears them first), so results agree with the CPU to FP32 rounding.
  void backward_backward_input(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    const auto* ctx = dynamic_cast<const PortableMlpContext*>(&base_ctx);
    if (!ctx) throw Error(name() + "::backward_backward_input: context does not come from this network's forward()");
    check_backward_backward(input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, mode,
                            [&](int64_t batch) { return ctx->z.size() == layers_.size() && ctx->batch == batch; });
    const gpuStream_t stream = stream_of(input);
    if (mode == GradientMode::Overwrite && n_params_ > 0)
      TF_GPU_CHECK(gpuMemsetAsync(gradients_, 0, n_params_ * sizeof(float), stream));
    const int64_t batch = input.rows();
    if (batch == 0) return;
    ForwardState state;
    for (size_t li = 0; li < layers_.size(); ++li) {
      state.z.push_back(ctx->z[li] == kNone ? nullptr : ctx->at(ctx->z[li]));
      state.y.push_back(ctx->y[li] == kNone ? nullptr : ctx->at(ctx->y[li]));
    }
    SecondOrderIo io;
    io.batch = batch;
    io.x = input.ptr<float>(), io.ldx = input.strides[0];
    io.v = dL_ddLdinput.ptr<float>(), io.ldv = dL_ddLdinput.strides[0];
    io.g = dL_doutput.ptr<float>(), io.ldg = dL_doutput.strides[0];
    if (dL_ddLdoutput) io.ddy = dL_ddLdoutput->ptr<float>(), io.ldddy = dL_ddLdoutput->strides[0];
    if (dL_dinput) io.d2x = dL_dinput->ptr<float>(), io.ldd2x = dL_dinput->strides[0];
    const SecondOrderShape shape{layers_, spec_.biases, spec_.activation, spec_.output_activation};
    second_order_sweeps(shape, weights_for(use_inference_params), state, io,
                        mode != GradientMode::Ignore ? gradients_ : nullptr, input.stream);
  }
};

}  // namespace

std::unique_ptr<Network> make_portable_mlp(const MlpSpec& spec, json hyperparams) {
  return std::make_unique<PortableMlp>(spec, std::move(hyperparams));
}

}  // namespace tinyfuse::cuda
