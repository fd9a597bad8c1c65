// The Grid encoding object on CUDA: argument checks, the level table on the device, and which
// kernels (grid_kernels.cuh) each call queues on the input's stream.
#include "cuda/encodings/grid_encoding.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "cuda/encodings/grid_kernels.cuh"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

struct GridContext : Context {
  int64_t batch = 0;
};

class GpuGridEncoding final : public Encoding {
 public:
  GpuGridEncoding(GridSpec spec, DType param_dtype, DType output_dtype)
      : spec_(std::move(spec)),
        param_dtype_(param_dtype),
        output_dtype_(output_dtype),
        n_output_(spec_.n_output_dims()),
        padded_(n_output_),
        levels_(Device::CUDA, spec_.n_levels * sizeof(grid::LevelInfo)) {
    std::vector<grid::LevelInfo> host(spec_.n_levels);
    for (uint32_t l = 0; l < spec_.n_levels; ++l) {
      host[l] = {spec_.level_scale[l], spec_.level_resolution[l], spec_.level_offset[l], spec_.level_table_size(l)};
      level_entries_.push_back(spec_.level_table_size(l));
    }
    TF_GPU_CHECK(gpuMemcpyAsync(levels_.data(), host.data(), host.size() * sizeof(grid::LevelInfo), gpuMemcpyDefault,
                                gpuStreamPerThread));
    TF_GPU_CHECK(gpuStreamSynchronize(gpuStreamPerThread));  // `host` goes out of scope
  }

  Device device() const override { return Device::CUDA; }
  DType param_dtype() const override { return param_dtype_; }
  DType input_dtype() const override { return DType::F32; }
  DType output_dtype() const override { return output_dtype_; }
  uint32_t input_width() const override { return spec_.n_dims; }
  uint32_t padded_output_width() const override { return padded_; }
  uint32_t output_width() const override { return n_output_; }
  size_t n_params() const override { return spec_.n_params(); }
  std::vector<ParamSegment> param_segments() const override { return grid_param_segments(spec_); }
  json hyperparams() const override { return grid_hyperparams(spec_); }
  std::string name() const override { return "Grid"; }

  // As the CPU grid (and tiny-cuda-nn): a multiple of lcm(alignment, n_features_per_level); padding is 0.
  void set_alignment(uint32_t alignment) override {
    padded_ = next_multiple(n_output_, std::lcm(std::max(alignment, 1u), spec_.n_features_per_level));
  }

  // A network that reads F16 gets F16 features, and the grid then keeps its features in F16 too
  // (as tiny-cuda-nn, whose grids hold the network's precision): both change together, before
  // set_params(), so a model has one parameter dtype.
  void set_output_dtype(DType dtype) override {
    if (dtype != DType::F32 && dtype != DType::F16)
      throw UnsupportedError("Grid on CUDA writes F32 or F16 features, not " + to_string(dtype));
    if (params_ && dtype != param_dtype_)
      throw Error("Grid: set_output_dtype() after set_params() would change the parameter dtype; call it first");
    output_dtype_ = dtype;
    param_dtype_ = dtype;
  }

  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    auto check = [&](const TensorView& t, const char* what, bool optional) -> void* {
      if (optional && t.data == nullptr) return nullptr;
      if (t.device != Device::CUDA || t.dtype != param_dtype_ || static_cast<size_t>(t.numel()) != n_params() ||
          !t.contiguous())
        throw ShapeError(std::string(what) + ": expected " + std::to_string(n_params()) + " contiguous " +
                         to_string(param_dtype_) + " values on cuda, got " + t.describe());
      return t.data;
    };
    params_ = check(params, "params", false);
    inference_params_ = check(inference_params, "inference_params", false);
    gradients_ = check(gradients, "gradients", true);
  }

  void initialize_params(Pcg32& rng, float* params_host, float scale) override {
    grid_initialize_params(spec_, rng, params_host, scale);
  }

  void inference(const TensorView& input, const TensorView& output) override {
    check_io(input, &output);
    grid::forward(job(input), {inference_params_, param_dtype_}, input.ptr<float>(), input.strides[0], matrix(output),
                  n_output_, padded_);
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool /*prepare_input_gradients: backward recomputes what it needs*/) override {
    check_io(input, output);
    auto ctx = std::make_unique<GridContext>();
    ctx->batch = input.rows();
    if (output)
      grid::forward(job(input), {use_inference_params ? inference_params_ : params_, param_dtype_}, input.ptr<float>(),
                    input.strides[0], matrix(*output), n_output_, padded_);
    return ctx;
  }

  void backward(const Context& ctx, const TensorView& input, const TensorView& /*output*/, const TensorView& dL_doutput,
                const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    check_context(ctx, input, "backward");
    const int64_t batch = input.rows();
    check_output_like(dL_doutput, "dL_doutput", batch);
    if (dL_dinput) check_input_like(*dL_dinput, "dL_dinput", batch);
    check_gradient_buffer(mode, "backward");
    const grid::Job j = job(input);
    if (mode != GradientMode::Ignore)
      grid::param_gradients(j, gradient_request(input, dL_doutput, nullptr, mode));
    if (dL_dinput)
      grid::input_gradients(j, {use_inference_params ? inference_params_ : params_, param_dtype_}, input.ptr<float>(),
                            input.strides[0], matrix(dL_doutput), dL_dinput->ptr<float>(), dL_dinput->strides[0]);
  }

  void backward_backward_input(const Context& ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    check_second_order(ctx, input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, "dL_ddLdoutput", dL_dinput, mode,
                       "backward_backward_input");
    const grid::Job j = job(input);
    if (mode != GradientMode::Ignore)
      grid::param_gradients(j, gradient_request(input, dL_doutput, &dL_ddLdinput, mode));
    if (dL_ddLdoutput)
      grid::second_order_output_gradients(j, {use_inference_params ? inference_params_ : params_, param_dtype_},
                                          input.ptr<float>(), input.strides[0], dL_ddLdinput.ptr<float>(),
                                          dL_ddLdinput.strides[0], matrix(*dL_ddLdoutput), n_output_, padded_);
    if (dL_dinput)
      grid::second_order_input_gradients(j, {use_inference_params ? inference_params_ : params_, param_dtype_},
                                         input.ptr<float>(), input.strides[0], dL_ddLdinput.ptr<float>(),
                                         dL_ddLdinput.strides[0], matrix(dL_doutput), dL_dinput->ptr<float>(),
                                         dL_dinput->strides[0]);
  }

  // Both parameter terms in one pass over the table where the fast sums allow it (W4e's eikonal
  // step: the second order's pass and the first order's that followed it each walked every corner
  // of 2^17 records with an atomic per corner); otherwise, and for dL2/dinput, the two calls.
  void backward_backward_input_and_backward(const Context& ctx, const TensorView& input, const TensorView& output,
                                            const TensorView& dL_ddLdinput, const TensorView& dL_doutput,
                                            const TensorView& dL_doutput_first, const TensorView* dL_dinput,
                                            bool use_inference_params, GradientMode mode) override {
    const grid::Job j = job(input);
    if (mode == GradientMode::Ignore || !grid::first_order_rides_on_second(j.g, spec_.deterministic))
      return Encoding::backward_backward_input_and_backward(ctx, input, output, dL_ddLdinput, dL_doutput,
                                                            dL_doutput_first, dL_dinput, use_inference_params, mode);
    check_second_order(ctx, input, dL_ddLdinput, dL_doutput, &dL_doutput_first, "dL_doutput_first", dL_dinput,
                       mode, "backward_backward_input_and_backward");
    grid::param_gradients(j, gradient_request(input, dL_doutput, &dL_ddLdinput, mode, &dL_doutput_first));
    if (dL_dinput)
      Encoding::backward_backward_input_and_backward(ctx, input, output, dL_ddLdinput, dL_doutput, dL_doutput_first,
                                                     dL_dinput, use_inference_params, GradientMode::Ignore);
  }

 private:
  grid::Job job(const TensorView& input) const {
    grid::Launch g{spec_.type, spec_.hash, spec_.interpolation, spec_.stochastic_interpolation, spec_.n_levels,
                   static_cast<const grid::LevelInfo*>(levels_.data())};
    return {g, spec_.n_dims, spec_.n_features_per_level, input.rows(), stream_of(input)};
  }

  static grid::Matrix matrix(const TensorView& t) { return {t.data, t.strides[0], t.dtype == DType::F16}; }

  grid::GradientRequest gradient_request(const TensorView& input, const TensorView& dL_doutput, const TensorView* v,
                                         GradientMode mode, const TensorView* dL_doutput_first = nullptr) const {
    return {input.ptr<float>(), input.strides[0], matrix(dL_doutput), v ? v->ptr<float>() : nullptr,
            v ? v->strides[0] : 0, dL_doutput_first ? matrix(*dL_doutput_first) : grid::Matrix{nullptr, 0, false},
            gradients_, param_dtype_, n_params(), level_entries_.data(), mode == GradientMode::Accumulate,
            spec_.deterministic};
  }

  void check_io(const TensorView& input, const TensorView* output) const {
    if (!params_) throw Error(name() + ": no parameters set; call set_params() (or use a Trainer) first");
    check_matrix(input, "input", -1, spec_.n_dims, DType::F32, Device::CUDA);
    check_rows_dense(input, "input");
    if (output) check_output_like(*output, "output", input.rows());
  }

  void check_output_like(const TensorView& t, const char* what, int64_t batch) const {
    check_matrix(t, what, batch, padded_, output_dtype_, Device::CUDA);
    check_rows_dense(t, what);
  }

  void check_input_like(const TensorView& t, const char* what, int64_t batch) const {
    check_matrix(t, what, batch, spec_.n_dims, DType::F32, Device::CUDA);
    check_rows_dense(t, what);
  }

  void check_context(const Context& base_ctx, const TensorView& input, const char* call) const {
    const auto* ctx = dynamic_cast<const GridContext*>(&base_ctx);
    if (!ctx) throw Error(name() + "::" + call + ": context does not come from this encoding's forward()");
    check_io(input, nullptr);
    if (ctx->batch != input.rows())
      throw ShapeError(name() + "::" + call + ": input batch " + std::to_string(input.rows()) +
                       " differs from the forward() that made the context (" + std::to_string(ctx->batch) + ")");
  }

  // What both second-order calls take: the context, v = dL2/d(dL/dinput), the upstream dL/doutput,
  // one more output-shaped matrix (bbi's dL_ddLdoutput, the joint call's first-order dL/doutput),
  // an optional dL2/dinput and the gradient buffer the mode needs.
  void check_second_order(const Context& ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                          const TensorView& dL_doutput, const TensorView* output_like, const char* output_like_name,
                          const TensorView* dL_dinput, GradientMode mode, const char* call) const {
    check_context(ctx, input, call);
    const int64_t batch = input.rows();
    check_input_like(dL_ddLdinput, "dL_ddLdinput", batch);
    check_output_like(dL_doutput, "dL_doutput", batch);
    if (output_like) check_output_like(*output_like, output_like_name, batch);
    if (dL_dinput) check_input_like(*dL_dinput, "dL_dinput", batch);
    check_gradient_buffer(mode, call);
  }

  void check_gradient_buffer(GradientMode mode, const char* call) const {
    if (mode != GradientMode::Ignore && !gradients_)
      throw Error(name() + "::" + call + ": parameter gradients requested but set_params() got no gradient buffer");
  }

  GridSpec spec_;
  DType param_dtype_, output_dtype_;
  uint32_t n_output_, padded_;
  std::vector<uint32_t> level_entries_;  // each level's table entries, as grid::GradientRequest takes them
  Buffer levels_;  // grid::LevelInfo per level, on the device
  void* params_ = nullptr;
  void* inference_params_ = nullptr;
  void* gradients_ = nullptr;
};

void check_dtype(DType t, const char* what) {
  if (t != DType::F32 && t != DType::F16)
    throw ConfigError(std::string("encoding.") + what, to_string(t), "CUDA grids keep features in f32 or f16",
                      "f32, f16");
}

}  // namespace

std::unique_ptr<Encoding> make_grid_encoding(const GridSpec& spec, DType param_dtype, DType output_dtype) {
  check_dtype(param_dtype, "param_dtype");
  check_dtype(output_dtype, "output_dtype");
  if (spec.n_dims < 1 || spec.n_dims > kGridMaxDims)
    throw ConfigError("encoding.n_input_dims", std::to_string(spec.n_dims), "grid encodings encode 1 to 4 input dimensions",
                      "1, 2, 3, 4");
  return std::make_unique<GpuGridEncoding>(spec, param_dtype, output_dtype);
}

}  // namespace tinyfuse::cuda
