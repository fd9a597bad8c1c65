// What every MLP shares whatever its backend: the layout of the flat parameter buffer
// (docs/PARAMETERS.md: per layer its weights, row-major out x in, then its bias if any), the
// Network getters, the parameter segments, the initialisation (core/mlp_init.h) and the checks of
// set_params. A backend adds its device, dtypes and the math.
#pragma once

#include <string>
#include <vector>

#include "core/mlp_init.h"
#include "core/network_config.h"
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

}  // namespace tinyfuse
