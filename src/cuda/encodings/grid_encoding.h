// Multiresolution grid encodings (Hash, Dense, Tiled) on CUDA. Written on the `grid` branch;
// this declaration is what the CUDA encoding dispatch (make_encoding.cpp) calls, and the grid
// branch's header takes its place at merge.
#pragma once

#include <memory>

#include "core/encodings/grid_config.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cuda {

std::unique_ptr<Encoding> make_grid_encoding(const GridSpec& spec);

}  // namespace tinyfuse::cuda
