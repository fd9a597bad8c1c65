// What the parameter-free encodings computed row by row (Frequency, TriangleWave, OneBlob,
// SphericalHarmonics, Empty; Identity on CUDA) share on every backend: name, hyperparameters,
// widths, no parameters, and the padding: features of value 1 (tiny-cuda-nn's convention) after
// the real features or, for SphericalHarmonics, before them. A backend adds the computation.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/encodings/paddable_encoding.h"

namespace tinyfuse {

// `Base` is the backend's encoding base, a PaddableEncoding.
template <typename Base>
class ParameterFreeEncoding : public Base {
 public:
  ParameterFreeEncoding(std::string name, uint32_t n_inputs, uint32_t n_outputs, bool pad_in_front, json hyperparams)
      : name_(std::move(name)),
        n_in_(n_inputs),
        n_out_(n_outputs),
        pad_in_front_(pad_in_front),
        hyperparams_(std::move(hyperparams)) {}

  uint32_t input_width() const override { return n_in_; }
  uint32_t output_width() const override { return n_out_; }
  uint32_t padded_output_width() const override { return n_out_ + n_pad_; }
  size_t n_params() const override { return 0; }
  std::vector<ParamSegment> param_segments() const override { return {}; }
  void set_params(const TensorView&, const TensorView&, const TensorView&) override {}
  void initialize_params(Pcg32&, float*, float) override {}
  json hyperparams() const override { return hyperparams_; }
  std::string name() const override { return name_; }

  void set_padded_output_width(uint32_t width) override {
    if (width < n_out_)
      throw ShapeError(name_ + ": padded output width " + std::to_string(width) + " is below its output width " +
                       std::to_string(n_out_));
    n_pad_ = width - n_out_;
  }

 protected:
  uint32_t padding() const { return n_pad_; }
  // In an output row: the column of the first feature and the first padding column.
  uint32_t first_feature() const { return pad_in_front_ ? n_pad_ : 0; }
  uint32_t padding_begin() const { return pad_in_front_ ? 0 : n_out_; }

 private:
  std::string name_;
  uint32_t n_in_, n_out_, n_pad_ = 0;
  bool pad_in_front_;
  json hyperparams_;
};

}  // namespace tinyfuse
