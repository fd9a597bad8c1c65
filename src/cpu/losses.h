// The losses on the CPU.
#pragma once

#include <memory>

#include "core/loss_config.h"
#include "tinyfuse/loss.h"

namespace tinyfuse::cpu {

// T: dtype of predictions, targets, values and gradients (float, or double for the reference mode).
template <typename T>
std::unique_ptr<Loss> make_loss(LossKind kind);

// For the row-tile engine, which evaluates the loss a tile of rows at a time while the tile's
// prediction is in cache. Whether `loss` is this backend's FP32 loss (the two calls below take
// only such a loss):
bool is_cpu_fp32_loss(const Loss& loss);
// evaluate()'s checks of a whole batch's views, before anything is computed;
void check_loss_views(const Loss& loss, const TensorView& prediction, const TensorView& target, const TensorView& values,
                      const TensorView& gradients, const TensorView* data_pdf);
// what evaluate() writes for rows [r0, r0 + n_rows) of a batch of `batch` rows (values into
// `values`' rows, checked), with the prediction and its gradient dense (n_rows, width) in the
// caller's buffers.
void evaluate_loss_rows(const Loss& loss, float loss_scale, int64_t batch, int64_t r0, int64_t n_rows,
                        const float* prediction, float* gradients, int64_t width, const TensorView& target,
                        const TensorView& values, const TensorView* data_pdf);

}  // namespace tinyfuse::cpu
