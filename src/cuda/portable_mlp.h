// PortableMLP on CUDA: plain FP32 kernels (no vendor library), any width and depth, biases.
#pragma once

#include <memory>

#include "core/network_config.h"
#include "tinyfuse/network.h"

namespace tinyfuse::cuda {

std::unique_ptr<Network> make_portable_mlp(const MlpSpec& spec, json hyperparams);

}  // namespace tinyfuse::cuda
