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

  // The encoding's half of a composed model's second derivatives (NetworkWithInputEncoding's
  // backward_backward_input): backward_backward_input(dL_ddLdinput, dL_doutput) into the
  // parameter gradients (`param_gradients_mode`) and dL2/dinput, then backward(dL_doutput_first)
  // added to both (what the network's second derivatives send back into the encoding).
  // `dL_dinput` may be null. By default exactly those calls; an encoding that can form both
  // parameter terms in one pass over its table does so (the CUDA grid's fast sums).
  virtual void backward_backward_input_and_backward(const Context& ctx, const TensorView& input,
                                                    const TensorView& output, const TensorView& dL_ddLdinput,
                                                    const TensorView& dL_doutput, const TensorView& dL_doutput_first,
                                                    const TensorView* dL_dinput, bool use_inference_params,
                                                    GradientMode param_gradients_mode);
};

}  // namespace tinyfuse
