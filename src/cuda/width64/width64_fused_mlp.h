// Width64FusedMLP: the dedicated FP16 inference path for exactly 64 -> 64 -> 64 -> 64 (two ReLU
// hidden layers, no output activation, biases), one fused kernel per call. Inference only.
#pragma once

#include <memory>

#include "core/network_config.h"
#include "tinyfuse/network.h"

namespace tinyfuse::cuda {

// `spec` has passed the Width64FusedMLP rules of core/network_config.cpp.
std::unique_ptr<Network> make_width64_fused_mlp(const MlpSpec& spec, json hyperparams);

}  // namespace tinyfuse::cuda
