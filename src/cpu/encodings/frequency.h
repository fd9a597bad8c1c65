// Frequency encoding on the CPU (tiny-cuda-nn's, NeRF's positional encoding): per input dim
// 2 * n_frequencies features sin(2^k pi x), cos(2^k pi x), k = 0 .. n_frequencies-1.
#pragma once

#include <memory>

#include "core/encodings/basic_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_frequency_encoding(const FrequencySpec& spec, uint32_t n_dims);

}  // namespace tinyfuse::cpu
