#include "core/loss_config.h"

#include "core/config_reader.h"
#include "core/otypes.h"
#include "tinyfuse/tensor.h"

namespace tinyfuse {

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = otype_names(ObjectKind::Loss);  // in LossKind's order
  return names;
}

LossKind parse_loss_config(const json& config, const std::string& path) {
  json c = config.is_object() && !config.contains("otype") ? json(config) : config;
  if (c.is_object() && !c.contains("otype")) c["otype"] = "RelativeL2";
  // tiny-cuda-nn spells two of them Mape / Smape; case-insensitive matching accepts both.
  std::string otype = read_otype(c, path, loss_names());
  ConfigReader r(c, path, {});
  for (size_t i = 0; i < loss_names().size(); ++i)
    if (loss_names()[i] == otype) return static_cast<LossKind>(i);
  return LossKind::RelativeL2;
}

void check_loss_values_shape(const TensorView& values, int64_t batch, int64_t width) {
  if (values.ndim == 2 && values.cols() != width && values.cols() != 1)
    throw ShapeError("values: must be (" + std::to_string(batch) + ", " + std::to_string(width) +
                     ") for per-element loss values or (" + std::to_string(batch) + ", 1) for per-row sums; got " +
                     values.describe());
}

}  // namespace tinyfuse
