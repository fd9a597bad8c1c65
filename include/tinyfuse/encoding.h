// An encoding maps FP32 input coordinates (batch, input_width) to features
// (batch, padded_output_width), padded so that the network after it can read them directly.
#pragma once

#include "tinyfuse/object.h"

namespace tinyfuse {

class Encoding : public DifferentiableObject {
 public:
  // Pads padded_output_width() to a multiple of `alignment` (the network's input alignment);
  // padding features are written as 1 (tiny-cuda-nn's convention, so a following layer may use
  // them as a bias).
  virtual void set_alignment(uint32_t alignment) = 0;
};

}  // namespace tinyfuse
