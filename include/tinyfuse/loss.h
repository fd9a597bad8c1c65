// A loss turns predictions and targets into per-element values and scaled gradients.
#pragma once

#include <optional>

#include "tinyfuse/object.h"

namespace tinyfuse {

// tiny-cuda-nn's losses (loss otypes by these names).
enum class LossKind { L2, L1, RelativeL2, RelativeL2Luminance, RelativeL1, MAPE, SMAPE, CrossEntropy, Variance };

class Loss {
 public:
  virtual ~Loss() = default;
  virtual Device device() const = 0;
  // Which of tiny-cuda-nn's losses this is; nothing for a loss of the caller's own. Networks that
  // can evaluate a loss inside their kernels (FullyFusedMLP) ask: they fold the built-in ones only.
  virtual std::optional<LossKind> kind() const { return std::nullopt; }
  // prediction: (batch, padded width) of the network's output dtype; target: (batch, n_target)
  // FP32 with n_target <= padded width; values and gradients: (batch, padded width) FP32 and
  // prediction dtype. Columns past n_target get value 0 and gradient 0.
  // values may instead be (batch, 1): each row's loss terms (the per-element values before the
  // division) added in groups of 8 columns (each group in column order, then the groups' sums
  // in order), divided once by the number of target elements. The Trainer keeps these: the same
  // loss (to rounding) for 4 bytes per sample instead of 4 per output element.
  // gradients = loss_scale * dLoss/dprediction, where Loss = sum(values) (values are already
  // divided by the number of target elements, so Loss is the mean). data_pdf: optional (batch, 1).
  virtual void evaluate(float loss_scale, const TensorView& prediction, const TensorView& target,
                        const TensorView& values, const TensorView& gradients,
                        const TensorView* data_pdf = nullptr) const = 0;
  virtual json hyperparams() const = 0;
  virtual std::string name() const = 0;
};

}  // namespace tinyfuse
