#include "core/network_with_input_encoding.h"

#include "core/host_memory.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse {

namespace {

struct ComposedContext : Context {
  Buffer encoded;  // the encoding's output, the network's input
  std::unique_ptr<Context> encoding_ctx, network_ctx;
};

class NetworkWithInputEncoding final : public DifferentiableObject {
 public:
  NetworkWithInputEncoding(std::shared_ptr<Encoding> encoding, std::shared_ptr<Network> network)
      : encoding_(std::move(encoding)),
        network_(std::move(network)),
        fuses_(dynamic_cast<FusesEncodingInference*>(network_.get())) {
    if (encoding_->device() != network_->device())
      throw UnsupportedError("NetworkWithInputEncoding: encoding on " + to_string(encoding_->device()) +
                             " but network on " + to_string(network_->device()) + "; build both for one device");
    // The encoding writes the network's input buffer directly, in the network's dtype (no
    // conversion pass); encodings that cannot write that dtype say so here.
    if (encoding_->output_dtype() != network_->input_dtype()) encoding_->set_output_dtype(network_->input_dtype());
    if (encoding_->output_dtype() != network_->input_dtype())
      throw UnsupportedError("NetworkWithInputEncoding: encoding writes " + to_string(encoding_->output_dtype()) +
                             " but network reads " + to_string(network_->input_dtype()));
    // One parameter buffer of the network's dtype holds both parts' parameters.
    if (encoding_->n_params() > 0 && encoding_->param_dtype() != network_->param_dtype())
      throw UnsupportedError("NetworkWithInputEncoding: " + encoding_->name() + " keeps " +
                             to_string(encoding_->param_dtype()) + " parameters but " + network_->name() + " keeps " +
                             to_string(network_->param_dtype()) +
                             " ones, and both share one parameter buffer; pick a network of " +
                             to_string(encoding_->param_dtype()) + " parameters");
    if (encoding_->padded_output_width() != network_->input_width())
      throw ShapeError("NetworkWithInputEncoding: encoding's padded output width " +
                       std::to_string(encoding_->padded_output_width()) + " differs from network input width " +
                       std::to_string(network_->input_width()));
  }

  Device device() const override { return network_->device(); }
  DType param_dtype() const override { return network_->param_dtype(); }
  DType input_dtype() const override { return encoding_->input_dtype(); }
  DType output_dtype() const override { return network_->output_dtype(); }
  uint32_t input_width() const override { return encoding_->input_width(); }
  uint32_t padded_output_width() const override { return network_->padded_output_width(); }
  uint32_t output_width() const override { return network_->output_width(); }
  size_t n_params() const override { return network_->n_params() + encoding_->n_params(); }
  uint32_t batch_granularity() const override {
    return std::lcm(encoding_->batch_granularity(), network_->batch_granularity());
  }

  // Network parameters first, then the encoding's (tiny-cuda-nn's order).
  std::vector<ParamSegment> param_segments() const override {
    auto segs = network_->param_segments();
    for (auto s : encoding_->param_segments()) {
      s.offset += network_->n_params();
      segs.push_back(s);
    }
    return segs;
  }

  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    network_->set_params(head(params), head(inference_params), head(gradients));
    encoding_->set_params(tail(params), tail(inference_params), tail(gradients));
  }

  void initialize_params(Pcg32& rng, float* params, float scale) override {
    network_->initialize_params(rng, params, scale);
    encoding_->initialize_params(rng, params + network_->n_params(), scale);
  }

  void inference(const TensorView& input, const TensorView& output) override {
    if (fuses_ && fuses_->inference_through(*encoding_, input, output)) return;
    Buffer encoded;
    TensorView enc = encoded_view(encoded, input);
    encoding_->inference(input, enc);
    network_->inference(enc, output);
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool prepare_input_gradients) override {
    auto ctx = std::make_unique<ComposedContext>();
    TensorView enc = encoded_view(ctx->encoded, input);
    ctx->encoding_ctx = encoding_->forward(input, &enc, use_inference_params, prepare_input_gradients);
    ctx->network_ctx = network_->forward(enc, output, use_inference_params, true);
    return ctx;
  }

  // The network folds the loss into its forward where it can (object.h).
  std::unique_ptr<Context> forward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss,
                                             float loss_scale, const TensorView& target, const TensorView& values,
                                             const TensorView& gradients, const TensorView* data_pdf) override {
    auto ctx = std::make_unique<ComposedContext>();
    TensorView enc = encoded_view(ctx->encoded, input);
    ctx->encoding_ctx = encoding_->forward(input, &enc, false, false);
    ctx->network_ctx = network_->forward_with_loss(enc, output, loss, loss_scale, target, values, gradients, data_pdf);
    return ctx;
  }

  // The network runs its whole training pass on the encoded batch (in one kernel where it can,
  // object.h), forming dL/d(encoded) where the encoding needs it (its parameters' gradients, or
  // dL/dinput asked for); the encoding's backward then takes it from there. The same calls and
  // values as forward_with_loss then backward(), in the same order.
  void forward_backward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss, float loss_scale,
                                  const TensorView& target, const TensorView& values, const TensorView& gradients,
                                  const TensorView* data_pdf, GradientMode mode, const TensorView* dL_dinput) override {
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", input.rows(), input_width(), input_dtype(), device());
    const bool encoding_needs_grad = (encoding_->n_params() > 0 && mode != GradientMode::Ignore) || dL_dinput;
    Buffer encoded;
    TensorView enc = encoded_view(encoded, input);
    auto encoding_ctx = encoding_->forward(input, &enc, false, dL_dinput != nullptr);
    if (!encoding_needs_grad) {
      network_->forward_backward_with_loss(enc, output, loss, loss_scale, target, values, gradients, data_pdf, mode);
      return;
    }
    Buffer d_enc_buffer;
    const TensorView d_enc = features_gradient_view(d_enc_buffer, enc);
    network_->forward_backward_with_loss(enc, output, loss, loss_scale, target, values, gradients, data_pdf, mode,
                                         &d_enc);
    encoding_->backward(*encoding_ctx, input, enc, d_enc, dL_dinput, false, mode);
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& output,
                const TensorView& dL_doutput, const TensorView* dL_dinput, bool use_inference_params,
                GradientMode mode) override {
    const ComposedContext* ctx = checked_context(base_ctx, input, "backward");
    // Checked here, not only by the encoding: by then the network would have written its gradients.
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", input.rows(), input_width(), input_dtype(), device());
    TensorView enc = ctx->encoded.matrix(network_->input_dtype(), input.rows(), network_->input_width(), input.stream);
    const bool encoding_needs_grad = encoding_->n_params() > 0 || dL_dinput != nullptr;
    Buffer d_enc_buffer;
    TensorView d_enc;
    if (encoding_needs_grad) d_enc = features_gradient_view(d_enc_buffer, enc);
    network_->backward(*ctx->network_ctx, enc, output, dL_doutput, encoding_needs_grad ? &d_enc : nullptr,
                       use_inference_params, mode);
    if (encoding_needs_grad)
      encoding_->backward(*ctx->encoding_ctx, input, enc, d_enc, dL_dinput, use_inference_params, mode);
  }

  // The chain rule twice. With e = encoding(x), dL/de = J_net^T g and dL/dx = J_enc^T dL/de, a
  // loss on dL/dx with v = dL2/d(dL/dx) gives:
  //  1. w = dL2/d(dL/de) = J_enc v (the encoding's second-order call, nothing else asked);
  //  2. the network's second derivatives for w at upstream g: its parameter gradients, dL2/dg and
  //     eps = dL2/de through the network's Hessian;
  //  3. the encoding's second derivatives at upstream dL/de: its parameter terms and the Hessian
  //     term of dL2/dx;
  //  4. eps back through the encoding's first-order backward: its parameter gradients
  //     (accumulated) and J_enc^T eps, added to dL2/dx.
  // Steps 3 and 4 are one call (Encoding::backward_backward_input_and_backward), so that an
  // encoding can add both parameter terms in one pass over its table.
  // dL/de is recomputed by the network's backward() (the forward keeps no gradients). The first
  // call that writes the caller's buffers is the network's, so a network without second
  // derivatives refuses before anything is written.
  void backward_backward_input(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    const char* call = "backward_backward_input";
    const ComposedContext* ctx = checked_context(base_ctx, input, call);
    const int64_t batch = input.rows();
    check_matrix(dL_ddLdinput, "dL_ddLdinput", batch, input_width(), input_dtype(), device());
    check_matrix(dL_doutput, "dL_doutput", batch, padded_output_width(), output_dtype(), device());
    if (dL_ddLdoutput) check_matrix(*dL_ddLdoutput, "dL_ddLdoutput", batch, padded_output_width(), output_dtype(), device());
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", batch, input_width(), input_dtype(), device());
    const bool encoding_params = encoding_->n_params() > 0 && mode != GradientMode::Ignore;
    const bool need_eps = dL_dinput != nullptr || encoding_params;
    const Stream stream = input.stream;
    TensorView enc = ctx->encoded.matrix(network_->input_dtype(), batch, network_->input_width(), stream);
    auto scratch = [&](Buffer& b, DType t, int64_t cols) {
      b = Buffer::on_stream(device(), static_cast<size_t>(batch) * cols * dtype_size(t), stream);
      return b.matrix(t, batch, cols, stream);
    };
    Buffer d_enc_buffer, w_buffer, eps_buffer;
    const TensorView d_enc = scratch(d_enc_buffer, enc.dtype, enc.cols());
    network_->backward(*ctx->network_ctx, enc, TensorView{}, dL_doutput, &d_enc, use_inference_params, GradientMode::Ignore);
    const TensorView w = scratch(w_buffer, enc.dtype, enc.cols());
    encoding_->backward_backward_input(*ctx->encoding_ctx, input, dL_ddLdinput, d_enc, &w, nullptr,
                                       use_inference_params, GradientMode::Ignore);
    const TensorView eps = need_eps ? scratch(eps_buffer, enc.dtype, enc.cols()) : TensorView{};
    network_->backward_backward_input(*ctx->network_ctx, enc, w, dL_doutput, dL_ddLdoutput, need_eps ? &eps : nullptr,
                                      use_inference_params, mode);
    if (!need_eps) return;
    encoding_->backward_backward_input_and_backward(*ctx->encoding_ctx, input, enc, dL_ddLdinput, d_enc, eps, dL_dinput,
                                                     use_inference_params,
                                                     encoding_params ? mode : GradientMode::Ignore);
  }

  json hyperparams() const override {
    return {{"otype", "NetworkWithInputEncoding"}, {"encoding", encoding_->hyperparams()}, {"network", network_->hyperparams()}};
  }
  std::string name() const override { return "NetworkWithInputEncoding"; }

  const Network& network() const { return *network_; }

 private:
  const ComposedContext* checked_context(const Context& base_ctx, const TensorView& input, const char* call) const {
    const auto* ctx = dynamic_cast<const ComposedContext*>(&base_ctx);
    if (!ctx) throw Error("NetworkWithInputEncoding::" + std::string(call) + ": context does not come from its forward()");
    check_matrix(input, "input", -1, input_width(), input_dtype(), device());
    if (checked_bytes({input.rows(), network_->input_width(), static_cast<int64_t>(dtype_size(network_->input_dtype()))},
                      "the encoded features", false) > ctx->encoded.bytes())
      throw ShapeError("NetworkWithInputEncoding::" + std::string(call) + ": input batch " + input.describe() +
                       " differs from the forward() that made the context");
    return ctx;
  }

  TensorView head(const TensorView& t) const {
    if (t.data == nullptr) return t;
    check_size(t);
    TensorView v = t;
    v.shape[0] = static_cast<int64_t>(network_->n_params());
    return v;
  }
  TensorView tail(const TensorView& t) const {
    if (t.data == nullptr) return t;
    TensorView v = t.rows_slice(static_cast<int64_t>(network_->n_params()), static_cast<int64_t>(encoding_->n_params()));
    return v;
  }
  void check_size(const TensorView& t) const {
    if (t.ndim != 1 || static_cast<size_t>(t.numel()) != n_params())
      throw ShapeError("NetworkWithInputEncoding::set_params: expected " + std::to_string(n_params()) +
                       " parameters, got " + t.describe());
  }
  // dL/d(features): laid out as the features `enc`, in `buffer` from the stream's pool.
  TensorView features_gradient_view(Buffer& buffer, const TensorView& enc) const {
    buffer = Buffer::on_stream(device(), enc.numel() * dtype_size(enc.dtype), enc.stream);
    return buffer.matrix(enc.dtype, enc.rows(), enc.cols(), enc.stream);
  }

  TensorView encoded_view(Buffer& buffer, const TensorView& input) const {
    // The input is checked before its row count sizes the encoding's output buffer.
    check_matrix(input, "input", -1, input_width(), input_dtype(), device());
    const DType t = network_->input_dtype();
    const size_t bytes = checked_bytes({input.rows(), network_->input_width(), static_cast<int64_t>(dtype_size(t))},
                                       "the encoded features of a batch of " + std::to_string(input.rows()),
                                       device() == Device::CPU);
    buffer = Buffer::on_stream(device(), bytes, input.stream);
    return buffer.matrix(t, input.rows(), network_->input_width(), input.stream);
  }

  std::shared_ptr<Encoding> encoding_;
  std::shared_ptr<Network> network_;
  FusesEncodingInference* fuses_;  // network_ where it can run the encoding inside its inference, else null
};

}  // namespace

const Network* network_inside(const DifferentiableObject& object) {
  const auto* nwie = dynamic_cast<const NetworkWithInputEncoding*>(&object);
  return nwie ? &nwie->network() : nullptr;
}

std::unique_ptr<DifferentiableObject> make_network_with_input_encoding(std::shared_ptr<Encoding> encoding,
                                                                       std::shared_ptr<Network> network) {
  return std::make_unique<NetworkWithInputEncoding>(std::move(encoding), std::move(network));
}

}  // namespace tinyfuse
