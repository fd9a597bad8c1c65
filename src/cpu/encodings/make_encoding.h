// Building a CPU encoding from its config: dispatch on otype to the encoding's own file.
#pragma once

#include <memory>
#include <string>

#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

// The encoding otypes the CPU backend builds (canonical spellings).
const std::vector<std::string>& encoding_otypes();

// T is float (the engine) or double (the reference mode). `path` names the config in errors
// ("encoding", "encoding.nested[1]"). Composite encodings call back into this for their parts.
template <typename T>
std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims);

}  // namespace tinyfuse::cpu
