// The activations of tiny-cuda-nn, by name.
#pragma once

#include <string>
#include <vector>

namespace tinyfuse {

enum class Activation { None, ReLU, LeakyReLU, SiLU, Exponential, Sine, Sigmoid, Squareplus, Softplus, Tanh };

const std::vector<std::string>& activation_names();
std::string to_string(Activation a);
// Case-insensitive, as tiny-cuda-nn; throws ConfigError (naming `key`) for unknown names.
Activation parse_activation(const std::string& name, const std::string& key);

}  // namespace tinyfuse
