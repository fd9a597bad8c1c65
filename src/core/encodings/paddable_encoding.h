// tiny-cuda-nn's finer padding control, which both backends' encodings offer so that a Composite
// lays its parts out exactly as tiny-cuda-nn does: padding to any width, and the multiple at
// which an encoding's output must start inside a concatenation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "tinyfuse/encoding.h"

namespace tinyfuse {

class PaddableEncoding : public Encoding {
 public:
  // Pads to exactly `width` >= output_width() (tiny-cuda-nn's set_padded_output_width).
  virtual void set_padded_output_width(uint32_t width) = 0;
  // tiny-cuda-nn's required_output_alignment.
  virtual uint32_t required_output_alignment() const { return 1; }
  void set_alignment(uint32_t alignment) override {
    set_padded_output_width(
        next_multiple(output_width(), std::lcm(std::max(alignment, 1u), std::max(required_output_alignment(), 1u))));
  }
};

// required_output_alignment() of any encoding: PaddableEncodings say it; for others (Identity and
// grids on the CPU, grids on CUDA) it is their "n_features_per_level" hyperparameter if they have
// one (tiny-cuda-nn's grids need their output to start at a multiple of it), else 1.
inline uint32_t required_output_alignment(const Encoding& encoding) {
  if (const auto* e = dynamic_cast<const PaddableEncoding*>(&encoding)) return std::max(e->required_output_alignment(), 1u);
  const json hp = encoding.hyperparams();
  if (hp.is_object() && hp.contains("n_features_per_level") && hp.at("n_features_per_level").is_number_integer()) {
    const int64_t n = hp.at("n_features_per_level").get<int64_t>();
    return n > 1 ? static_cast<uint32_t>(n) : 1u;
  }
  return 1;
}

}  // namespace tinyfuse
