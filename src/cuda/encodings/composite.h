// Composite encoding on CUDA (tiny-cuda-nn's), and the "NRC" preset built from it: nested
// encodings, each reading its own range of input dims, with outputs concatenated (default) or
// reduced by Sum or Product. Same layout and semantics as the CPU backend's
// (src/cpu/encodings/composite.cpp); the parts are built through cuda::make_encoding.
#pragma once

#include <memory>
#include <string>

#include "cuda/encodings/gpu_encoding.h"

namespace tinyfuse::cuda {

std::unique_ptr<GpuEncoding> make_composite_encoding(const json& config, const std::string& path, uint32_t n_dims);

// otype "NRC" / "OneBlobFrequency".
std::unique_ptr<GpuEncoding> make_nrc_encoding(const json& config, const std::string& path, uint32_t n_dims);

}  // namespace tinyfuse::cuda
