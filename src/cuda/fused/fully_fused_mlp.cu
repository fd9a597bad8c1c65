// FullyFusedMLP on CUDA: the Network around the fused kernels (launch.h states their semantics;
// plan.h chooses which kernel runs each pass, and this class asks it once per batch and layout).
//
//   inference()  one kernel: input -> output, nothing else touches memory. Behind OneBlob
//                (NetworkWithInputEncoding) the kernel makes OneBlob's features itself where the
//                planner has it (inference_through): positions -> output, no feature matrix.
//   forward()    one kernel, also writing what backward() needs into the context: every hidden
//                layer's y (the next layer's input) and z where act' cannot be read from y
//                (hidden activations other than None / ReLU / LeakyReLU; the output layer's z
//                unless its activation is None).
//   backward()   one kernel for dL/dinput and, for parameter gradients, every layer's dZ, then the
//                deterministic split-K weight-gradient kernels dW = dZ^T X (weight_grad/); or, where
//                the planner has one, a kernel that forms the weight gradients itself.
//   forward_with_loss / forward_backward_with_loss (the Trainer's): the L2, RelativeL2 or L1 loss folded
//                into the training forward, and the whole pass as one kernel, where the planner
//                has a kernel for them; the default calls otherwise.
//
// The kernels need 16-byte aligned matrices with row strides of a multiple of 8 elements; views
// that are not (a column slice starting mid-row, say) are staged through aligned scratch with one
// 2-D copy each way. All work goes on stream_of(input); scratch comes from the stream-ordered
// pool; nothing synchronises the host.
#include "cuda/fused/fully_fused_mlp.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <stdexcept>

#include "core/activation_math.h"
#include "core/mlp_base.h"
#include "core/network_with_input_encoding.h"
#include "cuda/common.cuh"
#include "cuda/encodings/basic.h"
#include "cuda/gpu_mlp.h"
#include "cuda/staging.h"
#include "cuda/fused/launch.h"
#include "cuda/fused/plan.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cuda {

namespace {

template <typename T>
struct FusedContext final : Context {
  Buffer arena;
  int64_t batch = 0;
  T* hidden_y = nullptr;  // n_hidden (batch x width)
  T* hidden_z = nullptr;  // the same, or null
  T* out_z = nullptr;     // (batch x padded output), or null
};

template <typename T>
class FullyFusedMlp final : public GpuMlp<T>, public FusesEncodingInference {
  using Base = GpuMlp<T>;
  using Base::gradients_, Base::inference_params_, Base::layers_, Base::n_params_, Base::params_, Base::spec_;
  using Base::check_io, Base::input_width, Base::n_hidden_layers, Base::name, Base::padded_output_width, Base::width;

 public:
  FullyFusedMlp(MlpSpec spec, json hyperparams) : Base(std::move(spec), std::move(hyperparams)) {
    if (spec_.biases || spec_.n_hidden_layers < 1 || spec_.input_width % 16 != 0 || spec_.padded_output_width % 16 != 0)
      throw UnsupportedError("internal: " + spec_.otype + " spec breaks its config rules");
    shape_.width = static_cast<int>(spec_.n_neurons);
    shape_.in_width = static_cast<int>(spec_.input_width);
    shape_.out_width = static_cast<int>(spec_.padded_output_width);
    shape_.n_hidden = static_cast<int>(spec_.n_hidden_layers);
    shape_.act = spec_.activation;
    shape_.out_act = spec_.output_activation;
    fused::check_device_supports(kDType, shape_, spec_.otype);
  }

  void inference(const TensorView& input, const TensorView& output) override {
    check_io(input, &output);
    run_forward(fused::FusedPass::Inference, input, inference_params_, nullptr, &output);
  }

  // OneBlob's features made inside the network's kernel (fused/oneblob_input.h) where `encoding`
  // is a OneBlob the kernel reads and the planner has the kernel (FusedPass::EncodedInference).
  bool inference_through(const Encoding& encoding, const TensorView& input, const TensorView& output) override {
    if constexpr (!std::is_same_v<T, __half>) {
      return false;
    } else {
      const std::optional<fused::OneBlobInput> oneblob = fused_oneblob_input(encoding, input);
      if (!oneblob || oneblob->dims * oneblob->n_bins != spec_.input_width) return false;
      const int64_t batch = input.rows();
      check_matrix(output, "output", batch, padded_output_width(), this->output_dtype(), this->device());
      check_rows_dense(output, "output");
      if (!this->params_) throw Error(name() + ": no parameters set; call set_params() (or use a Trainer) first");
      if (batch == 0) return true;
      fused::CallLayout layout;
      layout.ld_in = oneblob->ldx;
      layout.ld_out = rows_aligned16(output) ? output.strides[0] : output.cols();  // as stage() leaves it
      layout.weights_aligned = aligned16(inference_params_);
      const fused::FusedPlan& plan = plan_of(fused::FusedPass::EncodedInference, batch, layout);
      if (plan.kernel == fused::FusedKernel::None) return false;  // nothing launched: the two kernels
      const gpuStream_t s = stream_of(input);
      const Staged out = stage(output, false, s);
      fused::ForwardArgs a;
      a.batch = batch;
      a.weights = inference_params_;
      a.output = out.data;
      a.ld_out = out.ld;
      a.oneblob = *oneblob;
      fused::launch_plan(plan, a, nullptr, s);
      unstage(out, output, s);
      return true;
    }
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool /*prepare_input_gradients*/) override {
    check_io(input, output);
    auto ctx = std::make_unique<FusedContext<T>>();
    run_forward(fused::FusedPass::TrainingForward, input, use_inference_params ? inference_params_ : params_, ctx.get(),
                output);
    return ctx;
  }

  // The loss evaluated by the training forward's kernel where the planner has one (launch.h,
  // ForwardArgs::Loss): the output is then not written (backward() never reads it). Anything it
  // cannot take in place goes the default way, forward() then the loss, which also reports bad
  // arguments.
  std::unique_ptr<Context> forward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss,
                                             float loss_scale, const TensorView& target, const TensorView& values,
                                             const TensorView& gradients, const TensorView* data_pdf) override {
    if (!data_pdf) {
      if (auto ctx = forward_folding_loss(input, loss, loss_scale, target, values, gradients)) return ctx;
    } else {
      plans_.ran_without_plan(fused::FusedPass::ForwardWithLoss);
    }
    return Network::forward_with_loss(input, output, loss, loss_scale, target, values, gradients, data_pdf);
  }

  // The whole pass in one kernel where the planner has one: the output and the loss gradients are
  // then not written. Otherwise the default two calls, which also report bad arguments.
  void forward_backward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss, float loss_scale,
                                  const TensorView& target, const TensorView& values, const TensorView& gradients,
                                  const TensorView* data_pdf, GradientMode mode, const TensorView* dL_dinput) override {
    if (!data_pdf && mode != GradientMode::Ignore) {
      if (train_step_in_one_kernel(input, loss, loss_scale, target, values, mode, dL_dinput)) return;
    } else {
      plans_.ran_without_plan(fused::FusedPass::TrainStep);
    }
    Network::forward_backward_with_loss(input, output, loss, loss_scale, target, values, gradients, data_pdf, mode,
                                        dL_dinput);
  }

  // Second derivatives: the fused second-order kernel and the weight-gradient kernels where the
  // planner has it (launch.h, SecondOrderArgs); otherwise an FP32 forward recomputed from these
  // parameters and the shared sweeps (mlp_second_order.h). Either way the forward's own state is
  // not reused (it keeps no z for ReLU, and the sweeps need it).
  void backward_backward_input(const Context& ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    if (second_order_in_one_kernel(ctx, input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, use_inference_params,
                                   mode))
      return;
    this->template recomputed_backward_backward_input<FusedContext<T>>(ctx, input, dL_ddLdinput, dL_doutput,
                                                          dL_ddLdoutput, dL_dinput, use_inference_params, mode);
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& /*output*/,
                const TensorView& dL_doutput, const TensorView* dL_dinput, bool use_inference_params,
                GradientMode mode) override {
    const auto* ctx = dynamic_cast<const FusedContext<T>*>(&base_ctx);
    if (!ctx) throw Error(name() + "::backward: context does not come from this network's forward()");
    this->check_backward(input, dL_doutput, dL_dinput, mode, [&](int64_t rows) { return ctx->batch == rows; });
    const int64_t batch = input.rows();
    const gpuStream_t s = stream_of(input);
    if (batch == 0) {
      if (mode == GradientMode::Overwrite) TF_GPU_CHECK(gpuMemsetAsync(gradients_, 0, n_params_ * sizeof(T), s));
      return;
    }
    const bool param_grads = mode != GradientMode::Ignore;
    if (!param_grads && !dL_dinput) return;
    const T* weights = use_inference_params ? inference_params_ : params_;
    if (param_grads) {
      if (backward_with_fused_weight_grads(*ctx, input, dL_doutput, dL_dinput, weights, mode)) return;
    } else {
      plans_.ran_without_plan(fused::FusedPass::BackwardWeightGrads);
    }

    fused::CallLayout layout;
    layout.dL_dinput = dL_dinput != nullptr;
    layout.dz = param_grads;
    const fused::FusedPlan& plan = plan_of(fused::FusedPass::Backward, batch, layout);

    // Scratch: every layer's dZ, and the weight-gradient partial sums of one launch's layers
    // (fused::kWeightGradLayersPerLaunch at a time; reused launch by launch).
    const size_t w = spec_.n_neurons, out = spec_.padded_output_width;
    std::vector<fused::WeightGradLayer> grads = weight_grad_layers();
    size_t partial_floats = 0;
    for (size_t first = 0; first < grads.size(); first += fused::kWeightGradLayersPerLaunch)
      partial_floats = std::max(partial_floats, fused::weight_grad_partial_floats(batch, &grads[first], launch_layers(first)));
    const size_t dz_bytes = param_grads ? scratch_bytes((spec_.n_hidden_layers * w + out) * batch * sizeof(T)) : 0;
    const size_t partial_bytes = param_grads ? scratch_bytes(partial_floats * sizeof(float)) : 0;
    Buffer scratch = Buffer::on_stream(Device::CUDA, std::max<size_t>(1, dz_bytes + partial_bytes), input.stream);
    T* dz = param_grads ? static_cast<T*>(scratch.data()) : nullptr;
    float* partial = reinterpret_cast<float*>(static_cast<char*>(scratch.data()) + dz_bytes);

    const Staged dout = stage(dL_doutput, true, s);
    Staged din;
    if (dL_dinput) din = stage(*dL_dinput, false, s);

    fused::BackwardArgs a;
    a.batch = batch;
    a.weights = weights;
    a.dL_doutput = dout.data;
    a.ld_dout = dout.ld;
    a.hidden_deriv = fused::derivative_from_y(spec_.activation) ? ctx->hidden_y : ctx->hidden_z;
    a.out_z = ctx->out_z;
    a.dz = dz;
    a.dL_dinput = dL_dinput ? din.data : nullptr;
    a.ld_din = din.ld;
    fused::launch_plan(plan, a, nullptr, s);
    if (dL_dinput) unstage(din, *dL_dinput, s);

    if (!param_grads) return;
    const Staged x0 = stage(input, true, s);
    for (size_t li = 0; li < layers_.size(); ++li) {
      fused::WeightGradLayer& g = grads[li];
      g.dz = dz + li * batch * w;  // the output layer's dZ follows the hidden ones
      g.ld_dz = g.rows;
      g.x = li == 0 ? x0.data : static_cast<const void*>(ctx->hidden_y + (li - 1) * batch * w);
      g.ld_x = li == 0 ? x0.ld : static_cast<int64_t>(w);
    }
    for (size_t first = 0; first < grads.size(); first += fused::kWeightGradLayersPerLaunch)
      fused::launch_weight_gradients(kDType, batch, &grads[first], launch_layers(first), partial,
                                     mode == GradientMode::Accumulate, s);
  }

  fused::FusedKernel kernel_used(fused::FusedPass pass) const { return plans_.last_kernel(pass); }

 private:
  static constexpr DType kDType = gpu_dtype_of<T>::value;

  // The plan of a pass for this batch and layout on the current device (plan.h), remembered.
  const fused::FusedPlan& plan_of(fused::FusedPass pass, int64_t batch, const fused::CallLayout& layout) const {
    fused::PlanInputs in;
    in.pass = pass;
    in.dtype = kDType;
    in.shape = shape_;
    in.batch = batch;
    in.layout = layout;
    in.device = &fused::device_limits();
    in.options = spec_.fused_kernels;
    return plans_.get(in);
  }

  // Parameter gradients (and dL/dinput where asked) through a backward that forms the weight
  // gradients itself: false, having launched nothing, where the planner has none.
  bool backward_with_fused_weight_grads(const FusedContext<T>& ctx, const TensorView& input, const TensorView& dL_doutput,
                                        const TensorView* dL_dinput, const T* weights, GradientMode mode) const {
    fused::CallLayout layout;
    layout.dL_dinput = dL_dinput != nullptr;
    const fused::FusedPlan& plan = plan_of(fused::FusedPass::BackwardWeightGrads, input.rows(), layout);
    if (plan.kernel == fused::FusedKernel::None) return false;
    const gpuStream_t s = stream_of(input);
    Buffer partial = Buffer::on_stream(Device::CUDA, std::max<size_t>(1, fused::plan_partial_floats(plan)) * sizeof(float),
                                       input.stream);
    const Staged dout = stage(dL_doutput, true, s), x0 = stage(input, true, s);
    Staged din;
    if (dL_dinput) din = stage(*dL_dinput, false, s);
    fused::BackwardArgs a;
    a.batch = input.rows();
    a.weights = weights;
    a.dL_doutput = dout.data;
    a.ld_dout = dout.ld;
    a.hidden_deriv = ctx.hidden_y;  // ReLU: act' from y
    a.out_z = ctx.out_z;            // an output activation's z (null for an identity output)
    a.input = x0.data;
    a.ld_in = x0.ld;
    a.dL_dinput = dL_dinput ? din.data : nullptr;
    a.ld_din = din.ld;
    float* p = static_cast<float*>(partial.data());
    fused::launch_plan(plan, a, p, s);
    if (dL_dinput) unstage(din, *dL_dinput, s);
    reduce_weight_partials(plan.blocks, p, mode, s);
    return true;
  }

  // backward_backward_input through fused_second_order_kernel: false, having checked the call and
  // launched nothing, where the planner has no kernel for it.
  bool second_order_in_one_kernel(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                                  const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                                  const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) const {
    const auto* ctx = dynamic_cast<const FusedContext<T>*>(&base_ctx);
    if (!ctx)
      throw Error(name() + "::backward_backward_input: context does not come from this network's forward()");
    this->check_backward_backward(input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, mode,
                                  [&](int64_t rows) { return ctx->batch == rows; });
    const int64_t batch = input.rows();
    const fused::FusedPlan& plan = plan_of(fused::FusedPass::SecondOrder, batch, fused::CallLayout{});
    if (plan.kernel == fused::FusedKernel::None) return false;
    const gpuStream_t s = stream_of(input);
    const bool param_grads = mode != GradientMode::Ignore;
    if (batch == 0) {
      if (mode == GradientMode::Overwrite) TF_GPU_CHECK(gpuMemsetAsync(gradients_, 0, n_params_ * sizeof(T), s));
      return true;
    }
    const bool hidden_curved = !activation_is_piecewise_linear(spec_.activation);
    const bool out_curved = !activation_is_piecewise_linear(spec_.output_activation);
    const bool curved = hidden_curved || out_curved;
    const size_t rows = static_cast<size_t>(batch), stack = curved ? 2 : 1;
    const size_t w = spec_.n_neurons, out = spec_.padded_output_width, in = spec_.input_width, nh = spec_.n_hidden_layers;
    const size_t by_out = (nh * w + out) * rows, by_in = (in + nh * w) * rows;

    // Layers [0, n_flowing) have the stacked [dz; dZ2] / [a; y] (2 x batch rows); the layers above
    // have no dZ2 and take the first batch rows only.
    std::vector<fused::WeightGradLayer> grads = weight_grad_layers();
    const size_t n_flowing = out_curved ? layers_.size() : hidden_curved ? nh : 0;
    size_t partial_floats = 0;
    auto launches = [&](auto&& each) {  // (first layer, layer count, batch rows) of every launch
      for (size_t first = 0; first < n_flowing; first += fused::kWeightGradLayersPerLaunch)
        each(first, std::min<size_t>(fused::kWeightGradLayersPerLaunch, n_flowing - first), 2 * batch);
      for (size_t first = n_flowing; first < layers_.size(); first += fused::kWeightGradLayersPerLaunch)
        each(first, std::min<size_t>(fused::kWeightGradLayersPerLaunch, layers_.size() - first), batch);
    };
    if (param_grads)
      launches([&](size_t first, size_t n, int64_t b) {
        partial_floats = std::max(partial_floats, fused::weight_grad_partial_floats(b, &grads[first], static_cast<int>(n)));
      });
    constexpr size_t kNotKept = ~size_t(0);
    size_t total = 0;
    auto take = [&](bool kept, size_t bytes) {
      if (!kept) return kNotKept;
      const size_t offset = total;
      total += scratch_bytes(bytes);
      return offset;
    };
    const size_t dz_at = take(param_grads, stack * by_out * sizeof(T));
    const size_t x_at = take(param_grads, stack * by_in * sizeof(T));
    const size_t partial_at = take(param_grads, partial_floats * sizeof(float));
    Buffer scratch = Buffer::on_stream(Device::CUDA, std::max<size_t>(1, total), input.stream);
    char* base = static_cast<char*>(scratch.data());
    auto at = [&](size_t offset) -> void* { return offset == kNotKept ? nullptr : base + offset; };

    const Staged x = stage(input, true, s), v = stage(dL_ddLdinput, true, s), g = stage(dL_doutput, true, s);
    Staged ddy, d2x;
    if (dL_ddLdoutput) ddy = stage(*dL_ddLdoutput, false, s);
    if (dL_dinput) d2x = stage(*dL_dinput, false, s);
    fused::SecondOrderArgs a;
    a.batch = batch;
    a.weights = this->weights_for(use_inference_params);
    a.input = x.data, a.ld_in = x.ld;
    a.dL_ddLdinput = v.data, a.ld_v = v.ld;
    a.dL_doutput = g.data, a.ld_dout = g.ld;
    a.dL_ddLdoutput = dL_ddLdoutput ? ddy.data : nullptr, a.ld_ddout = ddy.ld;
    a.dL_dinput = dL_dinput && curved ? d2x.data : nullptr, a.ld_din = d2x.ld;
    a.dz = at(dz_at);
    a.x = at(x_at);
    a.hidden_curved = hidden_curved;
    a.out_curved = out_curved;
    fused::launch_plan(plan, a, s);
    if (dL_ddLdoutput) unstage(ddy, *dL_ddLdoutput, s);
    if (dL_dinput) {
      // Piecewise-linear layers throughout: dL/dinput does not depend on the input (almost everywhere).
      if (!curved)
        TF_GPU_CHECK(gpuMemset2DAsync(d2x.data, d2x.ld * sizeof(T), 0, in * sizeof(T), rows, s));
      unstage(d2x, *dL_dinput, s);
    }
    if (!param_grads) return true;

    T* dz = static_cast<T*>(at(dz_at));
    T* xs = static_cast<T*>(at(x_at));
    for (size_t li = 0; li < layers_.size(); ++li) {
      fused::WeightGradLayer& gl = grads[li];
      gl.dz = dz + stack * rows * w * li;  // the output layer's follows the hidden ones
      gl.ld_dz = gl.rows;
      gl.x = xs + (li == 0 ? 0 : stack * rows * (in + w * (li - 1)));
      gl.ld_x = gl.cols;
    }
    float* partial = static_cast<float*>(at(partial_at));
    launches([&](size_t first, size_t n, int64_t b) {
      fused::launch_weight_gradients(kDType, b, &grads[first], static_cast<int>(n), partial, mode == GradientMode::Accumulate, s);
    });
    return true;
  }

  // The parameter gradients from the `chunks` per-block dW partials of a kernel that forms them
  // inside (written or added as `mode` says).
  void reduce_weight_partials(int64_t chunks, const float* partial, GradientMode mode, gpuStream_t s) const {
    const std::vector<fused::WeightGradLayer> grads = weight_grad_layers();
    fused::launch_weight_grad_reduce(kDType, chunks, grads.data(), static_cast<int>(grads.size()), partial,
                                     mode == GradientMode::Accumulate, s);
  }

  // Each layer's weight-gradient shape and destination; the operands are the caller's.
  std::vector<fused::WeightGradLayer> weight_grad_layers() const {
    std::vector<fused::WeightGradLayer> grads(layers_.size());
    for (size_t li = 0; li < layers_.size(); ++li) {
      grads[li].rows = static_cast<int>(layers_[li].out);
      grads[li].cols = static_cast<int>(layers_[li].in);
      grads[li].grad = gradients_ ? gradients_ + layers_[li].weight_offset : nullptr;  // none for dL/dinput alone
    }
    return grads;
  }

  // Layers in the weight-gradient launch that starts at layer `first`.
  int launch_layers(size_t first) const {
    return static_cast<int>(std::min<size_t>(fused::kWeightGradLayersPerLaunch, layers_.size() - first));
  }

  // The loss as the kernels take it (ForwardArgs::Loss), where it is a built-in CUDA loss and
  // target and values are views they can read and write in place; nullopt otherwise (the Loss then
  // runs, and checks them).
  std::optional<fused::ForwardArgs::Loss> kernel_loss(const TensorView& input, const Loss& loss, float loss_scale,
                                                      const TensorView& target, const TensorView& values) const {
    const std::optional<LossKind> kind = loss.device() == Device::CUDA ? loss.kind() : std::nullopt;
    if (!kind) return std::nullopt;
    const int64_t batch = input.rows(), width = padded_output_width(), dims = target.cols();
    if (input.ndim != 2 || batch < 1 || !on_gpu_matrix(target, DType::F32, batch, dims) || dims < 1 || dims > width ||
        !on_gpu_matrix(values, DType::F32, batch, 1))
      return std::nullopt;
    fused::ForwardArgs::Loss L;
    L.kind = static_cast<int>(*kind);
    L.scale = loss_scale;
    L.n = static_cast<float>(batch * dims);  // as the Loss divides
    L.dims = static_cast<int>(dims);
    L.target = static_cast<const float*>(target.data);
    L.ld_target = target.strides[0];
    L.vector_target = aligned16(target.data) && target.strides[0] % 4 == 0;  // as the Loss decides
    L.values = static_cast<float*>(values.data);
    L.values_rs = values.strides[0];
    return L;
  }

  static fused::CallLayout loss_layout(const fused::ForwardArgs::Loss& L) {
    fused::CallLayout layout;
    layout.loss_kind = L.kind;
    layout.loss_dims = L.dims;
    layout.vector_target = L.vector_target;
    return layout;
  }

  static bool on_gpu_matrix(const TensorView& v, DType t, int64_t rows, int64_t cols) {
    return v.ndim == 2 && v.dtype == t && v.device == Device::CUDA && v.rows() == rows && v.cols() == cols &&
           v.strides[1] == 1;
  }

  // forward_backward_with_loss's kernel path: false, having launched nothing, where the planner
  // has none.
  bool train_step_in_one_kernel(const TensorView& input, const Loss& loss, float loss_scale, const TensorView& target,
                                const TensorView& values, GradientMode mode, const TensorView* dL_dinput) const {
    std::optional<fused::ForwardArgs::Loss> L = kernel_loss(input, loss, loss_scale, target, values);
    if (!L || !gradients_) {
      plans_.ran_without_plan(fused::FusedPass::TrainStep);
      return false;
    }
    this->check_io(input, nullptr);
    if (dL_dinput) this->check_input_gradient(*dL_dinput, input.rows());  // as backward() checks it
    fused::CallLayout layout = loss_layout(*L);
    layout.input_ready = rows_aligned16(input);  // read in place, not staged
    layout.ld_in = input.strides[0];
    layout.dL_dinput = dL_dinput != nullptr;
    const fused::FusedPlan& plan = plan_of(fused::FusedPass::TrainStep, input.rows(), layout);
    if (plan.kernel == fused::FusedKernel::None) return false;
    const gpuStream_t s = stream_of(input);
    Staged din;
    if (dL_dinput) din = stage(*dL_dinput, false, s);
    fused::ForwardArgs a;
    a.batch = input.rows();
    a.weights = params_;
    a.input = input.data;
    a.ld_in = input.strides[0];
    a.loss = *L;
    a.dL_dinput = dL_dinput ? din.data : nullptr;
    a.ld_din = din.ld;
    Buffer partial = Buffer::on_stream(Device::CUDA, std::max<size_t>(1, fused::plan_partial_floats(plan)) * sizeof(float),
                                       input.stream);
    float* p = static_cast<float*>(partial.data());
    fused::launch_plan(plan, a, p, s);
    if (dL_dinput) unstage(din, *dL_dinput, s);
    reduce_weight_partials(plan.blocks, p, mode, s);
    return true;
  }

  // forward_with_loss's kernel path: null, having launched nothing, where the planner has none.
  std::unique_ptr<Context> forward_folding_loss(const TensorView& input, const Loss& loss, float loss_scale,
                                                const TensorView& target, const TensorView& values,
                                                const TensorView& gradients) const {
    std::optional<fused::ForwardArgs::Loss> L = kernel_loss(input, loss, loss_scale, target, values);
    if (!L || !on_gpu_matrix(gradients, kDType, input.rows(), padded_output_width()) || !rows_aligned16(gradients)) {
      plans_.ran_without_plan(fused::FusedPass::ForwardWithLoss);
      return nullptr;
    }
    check_io(input, nullptr);
    L->gradients = gradients.data;
    L->ld_grad = gradients.strides[0];
    // Planned before the context is allocated: nothing is allocated where the kernel does not run.
    const fused::FusedPlan& plan = plan_of(fused::FusedPass::ForwardWithLoss, input.rows(), loss_layout(*L));
    if (plan.kernel == fused::FusedKernel::None) return nullptr;
    auto ctx = std::make_unique<FusedContext<T>>();
    run_forward(fused::FusedPass::ForwardWithLoss, input, params_, ctx.get(), nullptr, &*L, &plan);
    return ctx;
  }

  // Inference, TrainingForward (keep set) or ForwardWithLoss (keep, loss and its plan set).
  void run_forward(fused::FusedPass pass, const TensorView& input, const T* weights, FusedContext<T>* keep,
                   const TensorView* output, const fused::ForwardArgs::Loss* loss = nullptr,
                   const fused::FusedPlan* loss_plan = nullptr) const {
    const int64_t batch = input.rows();
    const gpuStream_t s = stream_of(input);
    fused::ForwardArgs a;
    a.batch = batch;
    a.weights = weights;
    if (keep) {
      const size_t hidden_bytes = scratch_bytes(static_cast<size_t>(batch) * spec_.n_neurons * spec_.n_hidden_layers * sizeof(T));
      const bool keep_z = fused::hidden_keeps_z(spec_.activation);
      const bool keep_out_z = fused::output_keeps_z(spec_.output_activation);
      const size_t out_bytes = scratch_bytes(static_cast<size_t>(batch) * spec_.padded_output_width * sizeof(T));
      const size_t bytes = hidden_bytes * (keep_z ? 2 : 1) + (keep_out_z ? out_bytes : 0);
      keep->batch = batch;
      keep->arena = Buffer::on_stream(Device::CUDA, std::max<size_t>(1, bytes), input.stream);
      char* base = static_cast<char*>(keep->arena.data());
      keep->hidden_y = reinterpret_cast<T*>(base);
      keep->hidden_z = keep_z ? reinterpret_cast<T*>(base + hidden_bytes) : nullptr;
      keep->out_z = keep_out_z ? reinterpret_cast<T*>(base + hidden_bytes * (keep_z ? 2 : 1)) : nullptr;
      a.hidden_y = keep->hidden_y;
      a.hidden_z = keep->hidden_z;
      a.out_z = keep->out_z;
    }
    if (batch == 0) return;
    const Staged in = stage(input, true, s);
    a.input = in.data;
    a.ld_in = in.ld;
    Staged out;
    if (output) {
      out = stage(*output, false, s);
      a.output = out.data;
      a.ld_out = out.ld;
    }
    if (loss) {
      a.loss = *loss;
      fused::launch_plan(*loss_plan, a, nullptr, s);
      return;
    }
    fused::CallLayout layout;
    layout.ld_in = a.ld_in;
    layout.ld_out = a.ld_out;
    layout.weights_aligned = aligned16(weights);
    fused::launch_plan(plan_of(pass, batch, layout), a, nullptr, s);
    if (output) unstage(out, *output, s);
  }

  fused::FusedShape shape_;
  mutable fused::PlanMemory plans_;  // one object is called from one thread at a time (docs/ERRORS.md)
};

}  // namespace

std::unique_ptr<Network> make_fully_fused_mlp(const MlpSpec& spec, json hyperparams) {
  if (spec.precision == DType::F16) return std::make_unique<FullyFusedMlp<__half>>(spec, std::move(hyperparams));
  if (spec.precision == DType::BF16) return std::make_unique<FullyFusedMlp<__nv_bfloat16>>(spec, std::move(hyperparams));
  throw UnsupportedError("internal: FullyFusedMLP precision " + to_string(spec.precision));
}

fused::FusedKernel fused_kernel_used(const DifferentiableObject& object, fused::FusedPass pass) {
  const DifferentiableObject* o = &object;
  if (const Network* inner = network_inside(object)) o = inner;
  if (const auto* f16 = dynamic_cast<const FullyFusedMlp<__half>*>(o)) return f16->kernel_used(pass);
  if (const auto* bf16 = dynamic_cast<const FullyFusedMlp<__nv_bfloat16>*>(o)) return bf16->kernel_used(pass);
  throw std::invalid_argument("fused_kernel_used: " + object.name() + " is not a FullyFusedMLP");
}

}  // namespace tinyfuse::cuda
