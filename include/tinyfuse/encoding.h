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
  // Chooses the dtype features are written in (and dL_doutput is read in by backward()), so a
  // network can read them without a conversion pass. CPU encodings write their compute dtype
  // only; CUDA encodings write F32 (the default) or F16. Anything else is an UnsupportedError.
  virtual void set_output_dtype(DType dtype);
};

}  // namespace tinyfuse
