#include "core/loss_config.h"

#include "core/config_reader.h"

namespace tinyfuse {

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = {"L2",   "L1",   "RelativeL2",   "RelativeL2Luminance", "RelativeL1",
                                                 "MAPE", "SMAPE", "CrossEntropy", "Variance"};
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

}  // namespace tinyfuse
