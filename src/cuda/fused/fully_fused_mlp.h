// FullyFusedMLP on CUDA: tiny-cuda-nn's fully fused MLP (no biases, output padded to 16, hidden
// width 16/32/64/128) on tensor cores, in FP16 or BF16 (MlpSpec::precision) with FP32
// accumulation. Kernels: src/cuda/fused/{forward,backward,weight_grad}.cu.
#pragma once

#include <memory>

#include "core/network_config.h"
#include "tinyfuse/network.h"

namespace tinyfuse::cuda {

std::unique_ptr<Network> make_fully_fused_mlp(const MlpSpec& spec, json hyperparams);

}  // namespace tinyfuse::cuda
