// The Grid encodings (Hash, Dense, Tiled; 1-4 dims) on CUDA: the same config (GridSpec), parameter
// layout and initialisation as the CPU grid, FP32 or FP16 parameters and outputs, FP32 inputs.
// Plain C++: the CUDA encoding dispatch, tests and benchmarks include it without CUDA headers.
#pragma once

#include <memory>

#include "core/encodings/grid_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cuda {

// `param_dtype`: F32 or F16 (the features the kernels read; gradients are always summed in FP32
// and written in this dtype). `output_dtype`: F32 or F16, the dtype of the output and of
// dL/doutput. Inputs and dL/dinput are F32. spec.deterministic selects the order-independent
// parameter-gradient sum (fixed-point integer atomics) instead of float atomics.
// Throws ConfigError for other dtypes.
std::unique_ptr<Encoding> make_grid_encoding(const GridSpec& spec, DType param_dtype = DType::F32,
                                             DType output_dtype = DType::F32);

}  // namespace tinyfuse::cuda
