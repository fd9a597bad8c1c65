// The device-neutral half of the Composite encoding (tiny-cuda-nn's; also the "NRC" preset): its
// parts, built through build_encoding with the composite's own backend, and their layout: widths,
// padding, alignment, parameter offsets and segments, set_params slicing, initialisation and
// hyperparameters. A backend's Composite (CompositeEncodingBase below) only moves the data.
//
// Layout, as in tiny-cuda-nn:
//  * Concatenation: part i's features start where part i-1's padded features end; part i is
//    padded (by the part itself) so that part i+1 starts at a multiple of its required output
//    alignment, and the composite's own padding goes to the last part (so a SphericalHarmonics
//    last part gets it in front of its features, like everywhere in tiny-cuda-nn).
//  * Sum / Product: every part is padded to the same width and the composite's output column j
//    is the sum / product of the parts' column j, padding included (so a padding column of a
//    Sum holds the number of parts).
// Parts that are not PaddableEncodings (Identity and grids on the CPU, grids on CUDA) only have
// set_alignment(); a part is padded to exactly w columns with set_alignment(w), which gives w
// whenever w is a multiple of the part's own alignment, so the part writes its own padding
// values as tiny-cuda-nn's would. Otherwise (a width tiny-cuda-nn could give a grid but ours
// cannot take) the backend writes the missing columns itself, as ones after the part's output.
// Dims read by several parts get the sum of their input gradients; dims read by none get 0.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/encodings/build_encoding.h"
#include "core/encodings/composite_config.h"
#include "core/encodings/paddable_encoding.h"

namespace tinyfuse {

struct CompositePart {
  std::unique_ptr<Encoding> encoding;
  PaddableEncoding* paddable = nullptr;  // null: set_alignment() only (see above)
  uint32_t begin = 0, n_dims = 0;        // the input dims it reads
  uint32_t extra_padding = 0;            // ones the composite writes after the part's own padded output
  size_t param_offset = 0;
  bool owns_dims = true;  // no other part reads any of its dims
  uint32_t width() const { return encoding->padded_output_width() + extra_padding; }
};

class CompositeLayout {
 public:
  CompositeLayout(const CompositeSpec& spec, const std::string& path, uint32_t n_dims, const EncodingBackend& backend);

  ReductionType reduction() const { return reduction_; }
  const std::vector<CompositePart>& parts() const { return parts_; }
  // Whether every input dim is read by exactly one part; the most dims of a part that shares some.
  bool all_dims_owned() const { return all_dims_owned_; }
  uint32_t max_shared_dims() const { return max_shared_dims_; }
  // Where part i's columns start in a concatenated output.
  uint32_t column(size_t i) const;
  // Whether backward() has work for `part`: parameter gradients that `mode` asks for, or input
  // gradients.
  static bool backward_needed(const CompositePart& part, GradientMode mode, bool input_gradients) {
    return (part.encoding->n_params() > 0 && mode != GradientMode::Ignore) || input_gradients;
  }

  uint32_t input_width() const { return n_in_; }
  uint32_t output_width() const { return natural_width_; }
  uint32_t padded_output_width() const;
  void set_padded_output_width(uint32_t width);
  uint32_t required_output_alignment() const;
  size_t n_params() const { return n_params_; }
  std::vector<ParamSegment> param_segments() const;
  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients);
  void initialize_params(Pcg32& rng, float* params, float scale);
  json hyperparams() const;

 private:
  static uint32_t natural_width(CompositePart& p);
  static void set_part_width(CompositePart& p, uint32_t width);
  void find_dim_owners();

  uint32_t n_in_;
  ReductionType reduction_;
  std::vector<CompositePart> parts_;
  size_t n_params_ = 0;
  uint32_t natural_width_ = 0;
  uint32_t empty_padding_ = 0;  // width when no part encodes anything
  bool all_dims_owned_ = true;
  uint32_t max_shared_dims_ = 0;
};

// A backend's Composite derives from this with its encoding base (a PaddableEncoding) and adds
// device(), the dtypes and the data movement (inference, forward, backward).
template <typename Base>
class CompositeEncodingBase : public Base {
 public:
  CompositeEncodingBase(const CompositeSpec& spec, const std::string& path, uint32_t n_dims, const EncodingBackend& backend)
      : layout_(spec, path, n_dims, backend) {}

  uint32_t input_width() const override { return layout_.input_width(); }
  uint32_t output_width() const override { return layout_.output_width(); }
  uint32_t padded_output_width() const override { return layout_.padded_output_width(); }
  void set_padded_output_width(uint32_t width) override { layout_.set_padded_output_width(width); }
  uint32_t required_output_alignment() const override { return layout_.required_output_alignment(); }
  size_t n_params() const override { return layout_.n_params(); }
  std::vector<ParamSegment> param_segments() const override { return layout_.param_segments(); }
  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    layout_.set_params(params, inference_params, gradients);
  }
  void initialize_params(Pcg32& rng, float* params, float scale) override { layout_.initialize_params(rng, params, scale); }
  json hyperparams() const override { return layout_.hyperparams(); }
  std::string name() const override { return "Composite"; }

 protected:
  const std::vector<CompositePart>& parts() const { return layout_.parts(); }
  ReductionType reduction() const { return layout_.reduction(); }

  CompositeLayout layout_;
};

}  // namespace tinyfuse
