// An optimizer updates an FP32 master copy of the parameters from the gradients and writes the
// parameters the network computes with (and, for EMA, a separate set for inference).
#pragma once

#include <iosfwd>
#include <vector>

#include "tinyfuse/object.h"

namespace tinyfuse {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual Device device() const = 0;

  // Called once before the first step with the model's parameter count and segments.
  virtual void allocate(size_t n_params, const std::vector<ParamSegment>& segments) = 0;

  // master: FP32 master weights (updated in place). params: the weights the model computes with
  // (its param dtype; may alias master). gradients: loss_scale * dL/dparams in the model's dtype.
  virtual void step(float loss_scale, const TensorView& master, const TensorView& params,
                    const TensorView& gradients) = 0;

  // True when the optimizer keeps separate weights for inference (EMA).
  virtual bool has_inference_params() const { return false; }
  // Writes the inference weights into `out` (model dtype). Only if has_inference_params().
  virtual void write_inference_params(const TensorView& out) const { (void)out; }

  virtual float learning_rate() const = 0;
  virtual void set_learning_rate(float lr) = 0;
  virtual uint32_t step_count() const = 0;
  virtual json hyperparams() const = 0;
  virtual std::string name() const = 0;

  // Optimizer state (moments, step counter) for checkpoints.
  virtual json state_header() const = 0;
  virtual std::vector<float> state_data() const = 0;
  virtual void load_state(const json& header, const std::vector<float>& data) = 0;
};

}  // namespace tinyfuse
