// SphericalHarmonics encoding on the CPU (tiny-cuda-nn's): 3-D inputs in [0, 1] mapped to
// directions in [-1, 1]^3 and encoded by the real spherical harmonics of bands 0 .. degree-1
// (degree^2 features). As in tiny-cuda-nn, padding features (value 1) come before the harmonics.
#pragma once

#include <memory>

#include "core/encodings/basic_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

template <typename T>
std::unique_ptr<Encoding> make_spherical_harmonics_encoding(const SphericalHarmonicsSpec& spec);

}  // namespace tinyfuse::cpu
