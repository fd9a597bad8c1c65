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

void DifferentiableObject::forward_backward_with_loss(const TensorView& input, const TensorView& output,
                                                      const Loss& loss, float loss_scale, const TensorView& target,
                                                      const TensorView& values, const TensorView& gradients,
                                                      const TensorView* data_pdf, GradientMode param_gradients_mode,
                                                      const TensorView* dL_dinput) {
  auto ctx = forward_with_loss(input, output, loss, loss_scale, target, values, gradients, data_pdf);
  backward(*ctx, input, output, gradients, dL_dinput, false, param_gradients_mode);
}

}  // namespace tinyfuse
