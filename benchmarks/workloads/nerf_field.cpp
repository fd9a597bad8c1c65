#include "workloads/nerf_field.h"

#include <numeric>
#include <string>

#include "tinyfuse/buffer.h"

namespace tinyfuse::bench {

namespace {

constexpr uint32_t kPositionDims = 3, kDirectionDims = 3;

struct NerfContext : Context {
  Buffer features;  // (batch, density width + direction width): the colour network's input
  std::unique_ptr<Context> density, direction, color;
};

class NerfField final : public DifferentiableObject {
 public:
  NerfField(const json& config, uint32_t n_output_dims, const BuildOptions& options) {
    const json& d = config.at("density");
    const uint32_t density_width = d.at("n_output_dims").get<uint32_t>();
    density_ = create_network_with_input_encoding(kPositionDims, density_width, d.at("encoding"), d.at("network"), options);
    direction_ = create_encoding(config.at("direction_encoding"), kDirectionDims, options);
    const uint32_t features = density_->padded_output_width() + direction_->padded_output_width();
    color_ = create_network(config.at("color_network"), features, n_output_dims, options);
    // Every part writes (and reads its gradient) in the colour network's input dtype.
    if (direction_->output_dtype() != color_->input_dtype()) direction_->set_output_dtype(color_->input_dtype());
    if (density_->output_dtype() != color_->input_dtype())
      throw UnsupportedError("NeRF field: the density network writes " + to_string(density_->output_dtype()) +
                             " but the colour network reads " + to_string(color_->input_dtype()));
    if (density_->param_dtype() != color_->param_dtype())
      throw UnsupportedError("NeRF field: the density and colour networks keep parameters of different dtypes (" +
                             to_string(density_->param_dtype()) + ", " + to_string(color_->param_dtype()) +
                             "); they share one parameter buffer");
  }

  Device device() const override { return color_->device(); }
  DType param_dtype() const override { return color_->param_dtype(); }
  DType input_dtype() const override { return density_->input_dtype(); }
  DType output_dtype() const override { return color_->output_dtype(); }
  uint32_t input_width() const override { return kPositionDims + kDirectionDims; }
  uint32_t padded_output_width() const override { return color_->padded_output_width(); }
  uint32_t output_width() const override { return color_->output_width(); }
  uint32_t batch_granularity() const override {
    return std::lcm(std::lcm(density_->batch_granularity(), direction_->batch_granularity()), color_->batch_granularity());
  }
  size_t n_params() const override { return density_->n_params() + color_->n_params(); }

  std::vector<ParamSegment> param_segments() const override {
    auto segs = density_->param_segments();
    for (auto s : color_->param_segments()) {
      s.offset += density_->n_params();
      segs.push_back(s);
    }
    return segs;
  }

  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    density_->set_params(head(params), head(inference_params), head(gradients));
    color_->set_params(tail(params), tail(inference_params), tail(gradients));
  }

  void initialize_params(Pcg32& rng, float* params, float scale) override {
    density_->initialize_params(rng, params, scale);
    color_->initialize_params(rng, params + density_->n_params(), scale);
  }

  void inference(const TensorView& input, const TensorView& output) override {
    check_input(input);
    Buffer buffer;
    const TensorView f = features(buffer, input);
    density_->inference(position(input), density_part(f));
    direction_->inference(direction(input), direction_part(f));
    color_->inference(f, output);
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool prepare_input_gradients) override {
    check_input(input);
    auto ctx = std::make_unique<NerfContext>();
    const TensorView f = features(ctx->features, input);
    const TensorView dens = density_part(f), dir = direction_part(f);
    ctx->density = density_->forward(position(input), &dens, use_inference_params, prepare_input_gradients);
    ctx->direction = direction_->forward(direction(input), &dir, use_inference_params, prepare_input_gradients);
    ctx->color = color_->forward(f, output, use_inference_params, true);
    return ctx;
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& output,
                const TensorView& dL_doutput, const TensorView* dL_dinput, bool use_inference_params,
                GradientMode mode) override {
    const auto* ctx = dynamic_cast<const NerfContext*>(&base_ctx);
    if (!ctx) throw Error("NeRF field backward: the context does not come from its forward()");
    check_input(input);
    const int64_t batch = input.rows();
    if (ctx->features.bytes() < static_cast<size_t>(batch) * feature_width() * dtype_size(color_->input_dtype()))
      throw ShapeError("NeRF field backward: input " + input.describe() + " is not the batch of the forward() that made the context");
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", batch, input_width(), input_dtype(), device());
    const TensorView f = ctx->features.matrix(color_->input_dtype(), batch, feature_width(), input.stream);
    Buffer grad_buffer;
    const TensorView df = features_gradient(grad_buffer, f);
    color_->backward(*ctx->color, f, output, dL_doutput, &df, use_inference_params, mode);
    backward_from_features(*ctx->density, *ctx->direction, input, f, df, dL_dinput, use_inference_params, mode);
  }

  // The colour network trains through its own forward_backward_with_loss (on CUDA one kernel for
  // its forward, the loss and its backward with dL/dfeatures where the planner has one, as
  // NetworkWithInputEncoding trains its network), then the density network and the direction
  // encoding take dL/dfeatures back as backward() does.
  void forward_backward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss, float loss_scale,
                                  const TensorView& target, const TensorView& values, const TensorView& gradients,
                                  const TensorView* data_pdf, GradientMode mode, const TensorView* dL_dinput) override {
    check_input(input);
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", input.rows(), input_width(), input_dtype(), device());
    Buffer features_buffer, grad_buffer;
    const TensorView f = features(features_buffer, input);
    const TensorView dens = density_part(f), dir = direction_part(f);
    auto density_ctx = density_->forward(position(input), &dens, false, dL_dinput != nullptr);
    auto direction_ctx = direction_->forward(direction(input), &dir, false, dL_dinput != nullptr);
    const TensorView df = features_gradient(grad_buffer, f);
    color_->forward_backward_with_loss(f, output, loss, loss_scale, target, values, gradients, data_pdf, mode, &df);
    backward_from_features(*density_ctx, *direction_ctx, input, f, df, dL_dinput, false, mode);
  }

  json hyperparams() const override {
    return {{"otype", "NerfField"}, {"density", density_->hyperparams()}, {"direction_encoding", direction_->hyperparams()},
            {"color_network", color_->hyperparams()}};
  }
  std::string name() const override { return "NerfField"; }

 private:
  uint32_t feature_width() const { return color_->input_width(); }
  void check_input(const TensorView& input) const {
    check_matrix(input, "input", -1, input_width(), input_dtype(), device());
    check_rows_dense(input, "input");
  }
  static TensorView position(const TensorView& input) { return input.cols_slice(0, kPositionDims); }
  static TensorView direction(const TensorView& input) { return input.cols_slice(kPositionDims, kDirectionDims); }
  TensorView density_part(const TensorView& f) const { return f.cols_slice(0, density_->padded_output_width()); }
  TensorView direction_part(const TensorView& f) const {
    return f.cols_slice(density_->padded_output_width(), direction_->padded_output_width());
  }
  TensorView features(Buffer& buffer, const TensorView& input) const {
    const DType t = color_->input_dtype();
    buffer = Buffer::on_stream(device(), static_cast<size_t>(input.rows()) * feature_width() * dtype_size(t), input.stream);
    return buffer.matrix(t, input.rows(), feature_width(), input.stream);
  }
  TensorView features_gradient(Buffer& buffer, const TensorView& f) const {
    buffer = Buffer::on_stream(device(), static_cast<size_t>(f.numel()) * dtype_size(f.dtype), f.stream);
    return buffer.matrix(f.dtype, f.rows(), feature_width(), f.stream);
  }
  // dL/dfeatures back through the density network and (for dL_dinput) the direction encoding.
  void backward_from_features(const Context& density_ctx, const Context& direction_ctx, const TensorView& input,
                              const TensorView& f, const TensorView& df, const TensorView* dL_dinput,
                              bool use_inference_params, GradientMode mode) {
    TensorView dpos, ddir;
    if (dL_dinput) {
      dpos = dL_dinput->cols_slice(0, kPositionDims);
      ddir = dL_dinput->cols_slice(kPositionDims, kDirectionDims);
    }
    density_->backward(density_ctx, position(input), density_part(f), density_part(df), dL_dinput ? &dpos : nullptr,
                       use_inference_params, mode);
    if (dL_dinput)
      direction_->backward(direction_ctx, direction(input), direction_part(f), direction_part(df), &ddir,
                           use_inference_params, mode);
  }
  TensorView head(const TensorView& t) const {
    if (t.data == nullptr) return t;
    if (t.ndim != 1 || static_cast<size_t>(t.numel()) != n_params())
      throw ShapeError("NeRF field set_params: expected " + std::to_string(n_params()) + " parameters, got " + t.describe());
    TensorView v = t;
    v.shape[0] = static_cast<int64_t>(density_->n_params());
    return v;
  }
  TensorView tail(const TensorView& t) const {
    if (t.data == nullptr) return t;
    return t.rows_slice(static_cast<int64_t>(density_->n_params()), static_cast<int64_t>(color_->n_params()));
  }

  std::unique_ptr<DifferentiableObject> density_;
  std::unique_ptr<Encoding> direction_;
  std::unique_ptr<Network> color_;
};

}  // namespace

std::unique_ptr<DifferentiableObject> make_nerf_field(const json& config, uint32_t n_output_dims,
                                                      const BuildOptions& options) {
  return std::make_unique<NerfField>(config, n_output_dims, options);
}

}  // namespace tinyfuse::bench
