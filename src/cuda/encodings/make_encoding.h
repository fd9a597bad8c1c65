// Building a CUDA encoding from its config: dispatch on otype to the encoding's own file. The
// same otypes, keys and rules as the CPU backend (the configs are read in core/encodings/).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tinyfuse/encoding.h"

namespace tinyfuse::cuda {

// The encoding otypes the CUDA backend builds (canonical spellings).
const std::vector<std::string>& encoding_otypes();

// `path` names the config in errors ("encoding", "encoding.nested[1]"). Composite encodings call
// back into this for their parts. Features are F32 until set_output_dtype() says otherwise.
std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims);

}  // namespace tinyfuse::cuda
