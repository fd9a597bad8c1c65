// Building a CUDA encoding from its config (core/encodings/build_encoding.h with the CUDA
// backend's objects): the same otypes, keys and rules as the CPU backend.
#pragma once

#include <memory>
#include <string>

#include "tinyfuse/encoding.h"

namespace tinyfuse::cuda {

// `path` names the config in errors ("encoding", "encoding.nested[1]"). Features are F32 until
// set_output_dtype() says otherwise.
std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims);

}  // namespace tinyfuse::cuda
