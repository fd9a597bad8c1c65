// Multiresolution grid encodings (Hash, Dense, Tiled) on the CPU, forward and backward, with
// tiny-cuda-nn's parameter layout, indexing, interpolation and initialisation.
#pragma once

#include <memory>

#include "core/encodings/grid_config.h"
#include "tinyfuse/encoding.h"
#include "tinyfuse/random.h"

namespace tinyfuse::cpu {

// T is float (the engine) or double (the reference mode).
template <typename T>
std::unique_ptr<Encoding> make_grid_encoding(const GridSpec& spec);

// tiny-cuda-nn's GPU uniform fill, reproduced on the host: `n` values in [lo, hi) written in the
// order its generate_random kernel writes them (launched thread i of L = 128 * ceil(ceil(n / 4)
// / 128) takes draws 4i..4i+3 for elements i, i + L, i + 2L, i + 3L), leaving `rng` advanced by n
// draws as tiny-cuda-nn leaves it. So a seed gives tiny-cuda-nn's initial grid.
void fill_uniform_tcnn_order(Pcg32& rng, size_t n, float* out, float lo, float hi);

}  // namespace tinyfuse::cpu
