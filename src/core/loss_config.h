// Loss otypes and their (key-less) config.
#pragma once

#include <string>
#include <vector>

#include "tinyfuse/loss.h"
#include "tinyfuse/object.h"
#include "tinyfuse/tensor.h"

namespace tinyfuse {

const std::vector<std::string>& loss_names();  // indexed by LossKind
// tiny-cuda-nn's default otype is RelativeL2; losses take no other keys.
LossKind parse_loss_config(const json& config, const std::string& path = "loss");

// Loss::evaluate's values are (batch, width) per element or (batch, 1) per row (loss.h); any
// other column count is a ShapeError that names both.
void check_loss_values_shape(const TensorView& values, int64_t batch, int64_t width);
// Whether those values are per row (a width-1 prediction's are both: per element, then).
inline bool loss_values_per_row(const TensorView& values, int64_t width) { return values.cols() == 1 && width != 1; }

}  // namespace tinyfuse
