// BlasLtMLP / BlasLtMLPFP16: one cuBLASLt (hipBLASLt) matmul per layer with fused epilogues.
#pragma once

#include <memory>

#include "core/network_config.h"
#include "tinyfuse/network.h"

namespace tinyfuse::cuda {

// precision: F32 (FP32 operands and compute) or F16 (FP16 operands, FP32 compute).
std::unique_ptr<Network> make_blaslt_mlp(const MlpSpec& spec, json hyperparams, DType precision);

}  // namespace tinyfuse::cuda
