#include "tinyfuse/activation.h"

#include "core/config_reader.h"

namespace tinyfuse {

const std::vector<std::string>& activation_names() {
  static const std::vector<std::string> names = {"None",        "ReLU", "LeakyReLU",  "SiLU",     "Exponential",
                                                 "Sine",        "Sigmoid", "Squareplus", "Softplus", "Tanh"};
  return names;
}

std::string to_string(Activation a) { return activation_names()[static_cast<size_t>(a)]; }

Activation parse_activation(const std::string& name, const std::string& key) {
  const auto& names = activation_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (equals_case_insensitive(names[i], name)) return static_cast<Activation>(i);
  std::string close = closest_match(name, names);
  throw ConfigError(key, "\"" + name + "\"",
                    "unknown activation" + (close.empty() ? "" : " (did you mean \"" + close + "\"?)"), join(names));
}

}  // namespace tinyfuse
