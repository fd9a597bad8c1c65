#include "tinyfuse/object.h"

#include "tinyfuse/loss.h"

namespace tinyfuse {

std::unique_ptr<Context> DifferentiableObject::forward_with_loss(const TensorView& input, const TensorView& output,
                                                                 const Loss& loss, float loss_scale, const TensorView& target,
                                                                 const TensorView& values, const TensorView& gradients,
                                                                 const TensorView* data_pdf) {
  auto ctx = forward(input, &output, false, false);
  loss.evaluate(loss_scale, output, target, values, gradients, data_pdf);
  return ctx;
}

}  // namespace tinyfuse
