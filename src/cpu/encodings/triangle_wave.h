// TriangleWave encoding on the CPU (tiny-cuda-nn's, from neural radiance caching): per input dim
// n_frequencies triangle waves of period 2^(1-k) with a k/4-period phase shift.
#pragma once

#include <memory>

#include "core/encodings/basic_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_triangle_wave_encoding(const TriangleWaveSpec& spec, uint32_t n_dims);

}  // namespace tinyfuse::cpu
