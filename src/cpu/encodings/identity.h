// Identity encoding on the CPU: out = in * scale + offset, padding features set to 1.
#pragma once

#include <memory>

#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_identity_encoding(uint32_t n_dims, float scale, float offset, json hyperparams);

}  // namespace tinyfuse::cpu
