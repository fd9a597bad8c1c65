// Empty encoding on the CPU (tiny-cuda-nn's): swallows its inputs, produces no features (only
// padding, of value 1, if aligned) and gives zero input gradients.
#pragma once

#include <memory>

#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_empty_encoding(uint32_t n_dims);

}  // namespace tinyfuse::cpu
