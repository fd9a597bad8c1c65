// FullyFusedMLP on CUDA: tiny-cuda-nn's fully fused MLP (no biases, output padded to 16, hidden
// width 16/32/64/128) on tensor cores, in FP16 or BF16 (MlpSpec::precision) with FP32
// accumulation. Its kernels are chosen per pass by fused/plan.h.
#pragma once

#include <memory>

#include "core/network_config.h"
#include "cuda/fused/passes.h"
#include "tinyfuse/network.h"

namespace tinyfuse::cuda {

std::unique_ptr<Network> make_fully_fused_mlp(const MlpSpec& spec, json hyperparams);

// The kernel the last call of `pass` ran on `object` (a FullyFusedMLP, or a
// NetworkWithInputEncoding whose network is one); FusedKernel::None where no call of the pass has
// run, or where the pass ran as several kernels (ForwardWithLoss, BackwardWeightGrads,
// TrainStep). Throws std::invalid_argument for other objects. For tests and benchmarks.
fused::FusedKernel fused_kernel_used(const DifferentiableObject& object, fused::FusedPass pass);

}  // namespace tinyfuse::cuda
