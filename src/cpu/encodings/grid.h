// Multiresolution grid encodings (Hash, Dense, Tiled) on the CPU, forward and backward, with
// tiny-cuda-nn's parameter layout, indexing, interpolation and initialisation.
#pragma once

#include <memory>

#include "core/encodings/grid_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

// T is float (the engine) or double (the reference mode).
template <typename T>
std::unique_ptr<Encoding> make_grid_encoding(const GridSpec& spec);

}  // namespace tinyfuse::cpu
