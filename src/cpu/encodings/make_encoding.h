// Building a CPU encoding from its config (core/encodings/build_encoding.h with the CPU's objects).
#pragma once

#include <memory>
#include <string>

#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

// T is float (the engine) or double (the reference mode). `path` names the config in errors
// ("encoding", "encoding.nested[1]").
template <typename T>
std::unique_ptr<Encoding> make_encoding(const json& config, const std::string& path, uint32_t n_input_dims);

}  // namespace tinyfuse::cpu
