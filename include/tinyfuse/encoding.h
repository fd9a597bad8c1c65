// An encoding maps FP32 input coordinates (batch, input_width) to features
// (batch, padded_output_width), padded so that the network after it can read them directly.
#pragma once

#include "tinyfuse/object.h"

namespace tinyfuse {

class Encoding : public DifferentiableObject {
 public:
  // Pads padded_output_width() to a multiple of `alignment` (the network's input alignment).
  // What padding features hold follows tiny-cuda-nn: 1 for most encodings (so a following layer
  // may use them as a bias), 0 for grids; SphericalHarmonics puts its padding first.
  virtual void set_alignment(uint32_t alignment) = 0;
};

}  // namespace tinyfuse
