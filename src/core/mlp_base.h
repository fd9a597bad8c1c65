// What every MLP shares whatever its backend: the layout of the flat parameter buffer
// (docs/PARAMETERS.md: per layer its weights, row-major out x in, then its bias if any), the
// Network getters, the parameter segments, the initialisation (core/mlp_init.h), set_params and
// the checks every call starts with (MlpWithParams). A backend adds its device, dtypes and the
// math.
#pragma once

#include <string>
#include <vector>

#include "core/mlp_init.h"
#include "core/network_config.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/network.h"

namespace tinyfuse {

class MlpBase : public Network {
 public:
  struct Layer {
    uint32_t in, out;
    size_t weight_offset, bias_offset;  // bias_offset only meaningful with biases
  };

  MlpBase(MlpSpec spec, json hyperparams) : spec_(std::move(spec)), hyperparams_(std::move(hyperparams)) {
    uint32_t in = spec_.input_width;
    size_t offset = 0;
    for (uint32_t l = 0; l <= spec_.n_hidden_layers; ++l) {
      const uint32_t out = width(l);
      Layer layer{in, out, offset, 0};
      offset += static_cast<size_t>(out) * in;
      if (spec_.biases) {
        layer.bias_offset = offset;
        offset += out;
      }
      layers_.push_back(layer);
      in = out;
    }
    n_params_ = offset;
  }

  uint32_t input_width() const override { return spec_.input_width; }
  uint32_t padded_output_width() const override { return spec_.padded_output_width; }
  uint32_t output_width() const override { return spec_.output_width; }
  uint32_t n_hidden_layers() const override { return spec_.n_hidden_layers; }
  uint32_t width(uint32_t layer) const override {
    return layer < spec_.n_hidden_layers ? spec_.n_neurons : spec_.padded_output_width;
  }
  uint32_t required_input_alignment() const override { return spec_.input_alignment; }
  Activation activation() const override { return spec_.activation; }
  Activation output_activation() const override { return spec_.output_activation; }
  bool has_biases() const override { return spec_.biases; }
  size_t n_params() const override { return n_params_; }
  json hyperparams() const override { return hyperparams_; }
  std::string name() const override { return spec_.otype; }

  std::vector<ParamSegment> param_segments() const override {
    std::vector<ParamSegment> segs;
    for (const auto& l : layers_) {
      segs.push_back({l.weight_offset, static_cast<size_t>(l.out) * l.in, ParamSegment::Kind::Matrix, l.out, l.in});
      if (spec_.biases) segs.push_back({l.bias_offset, l.out, ParamSegment::Kind::Vector, 0, 0});
    }
    return segs;
  }

  void initialize_params(Pcg32& rng, float* params, float scale) override {
    initialize_mlp_params(layers_, spec_.biases, spec_.activation, rng, params, scale);
  }

 protected:
  // The data of a parameter view (params, inference params or gradients) after checking it holds
  // n_params() contiguous values of param_dtype() on device(); nullptr for an empty optional one.
  void* checked_param_view(const TensorView& t, const char* what, bool optional) const {
    if (optional && t.data == nullptr) return nullptr;
    if (t.device != device() || t.dtype != param_dtype() || static_cast<size_t>(t.numel()) != n_params_ ||
        !t.contiguous() || (t.data == nullptr && n_params_ > 0))
      throw ShapeError(std::string(what) + ": expected " + std::to_string(n_params_) + " contiguous " +
                       to_string(param_dtype()) + " values on " + to_string(device()) + ", got " + t.describe());
    return t.data;
  }

  // The activation after layer `li` (the output activation after the last).
  Activation layer_activation(size_t li) const {
    return li + 1 == layers_.size() ? spec_.output_activation : spec_.activation;
  }

  const MlpSpec spec_;
  const json hyperparams_;
  std::vector<Layer> layers_;
  size_t n_params_ = 0;
};

// An MLP whose parameters, inputs and outputs are T on its device (param_dtype(), input_dtype()
// and output_dtype() all name T): set_params keeps typed pointers, and the checks every call
// starts with, with the same messages on every backend.
template <typename T>
class MlpWithParams : public MlpBase {
 public:
  using MlpBase::MlpBase;

  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    params_ = static_cast<T*>(checked_param_view(params, "params", false));
    inference_params_ = static_cast<T*>(checked_param_view(inference_params, "inference_params", false));
    gradients_ = static_cast<T*>(checked_param_view(gradients, "gradients", true));
  }

 protected:
  // Parameters are set; input is (any, input_width()) and output (if given) (batch,
  // padded_output_width()), on device(), rows dense. A backend may add its own limits.
  virtual void check_io(const TensorView& input, const TensorView* output) const {
    if (!params_) throw Error(name() + ": no parameters set; call set_params() (or use a Trainer) first");
    check_matrix(input, "input", -1, input_width(), input_dtype(), device());
    check_rows_dense(input, "input");
    if (output) {
      check_matrix(*output, "output", input.rows(), padded_output_width(), output_dtype(), device());
      check_rows_dense(*output, "output");
    }
  }

  // A dL/dinput view of a `batch`-row call: (batch, input_width()) of input_dtype(), rows dense.
  void check_input_gradient(const TensorView& dL_dinput, int64_t batch) const {
    check_matrix(dL_dinput, "dL_dinput", batch, input_width(), input_dtype(), device());
    check_rows_dense(dL_dinput, "dL_dinput");
  }

  // The checks backward() starts with once its context is of the right type, in order;
  // `same_batch(batch)` says whether the context came from a forward() of `batch` rows.
  template <typename SameBatch>
  void check_backward(const TensorView& input, const TensorView& dL_doutput, const TensorView* dL_dinput,
                      GradientMode mode, SameBatch&& same_batch) const {
    check_gradient_call("backward", input, nullptr, dL_doutput, nullptr, dL_dinput, mode, same_batch);
  }

  // The same for backward_backward_input(), which also takes dL_ddLdinput and may write dL_ddLdoutput.
  template <typename SameBatch>
  void check_backward_backward(const TensorView& input, const TensorView& dL_ddLdinput, const TensorView& dL_doutput,
                               const TensorView* dL_ddLdoutput, const TensorView* dL_dinput, GradientMode mode,
                               SameBatch&& same_batch) const {
    check_gradient_call("backward_backward_input", input, &dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, mode,
                        same_batch);
  }

  const T* weights_for(bool use_inference_params) const { return use_inference_params ? inference_params_ : params_; }

  T* params_ = nullptr;
  T* inference_params_ = nullptr;
  T* gradients_ = nullptr;

 private:
  template <typename SameBatch>
  void check_gradient_call(const char* call, const TensorView& input, const TensorView* dL_ddLdinput,
                           const TensorView& dL_doutput, const TensorView* dL_ddLdoutput, const TensorView* dL_dinput,
                           GradientMode mode, SameBatch&& same_batch) const {
    check_io(input, nullptr);
    const int64_t batch = input.rows();
    auto check = [&](const TensorView& t, const char* what, uint32_t width, DType dtype) {
      check_matrix(t, what, batch, width, dtype, device());
      check_rows_dense(t, what);
    };
    if (dL_ddLdinput) check(*dL_ddLdinput, "dL_ddLdinput", input_width(), input_dtype());
    check(dL_doutput, "dL_doutput", padded_output_width(), output_dtype());
    if (dL_ddLdoutput) check(*dL_ddLdoutput, "dL_ddLdoutput", padded_output_width(), output_dtype());
    if (dL_dinput) check_input_gradient(*dL_dinput, batch);
    if (!same_batch(batch))
      throw ShapeError(name() + "::" + call + ": input batch differs from the forward() that made the context");
    if (mode != GradientMode::Ignore && !gradients_)
      throw Error(name() + "::" + call + ": parameter gradients requested but set_params() got no gradient buffer");
  }
};

}  // namespace tinyfuse
