// Reading a Grid encoding config ("Grid", "HashGrid", "DenseGrid", "TiledGrid") into a
// device-neutral description with tiny-cuda-nn's parameter layout resolved, so every backend
// agrees on what is accepted and where each level's parameters sit.
#pragma once

#include <string>
#include <vector>

#include "core/encodings/grid_math.h"
#include "tinyfuse/object.h"
#include "tinyfuse/random.h"

namespace tinyfuse {

struct GridSpec {
  GridType type = GridType::Hash;
  GridHash hash = GridHash::CoherentPrime;
  GridInterpolation interpolation = GridInterpolation::Linear;
  uint32_t n_dims = 0;
  uint32_t n_levels = 16;
  uint32_t n_features_per_level = 2;
  uint32_t log2_hashmap_size = 19;
  uint32_t base_resolution = 16;
  float per_level_scale = 2.0f;
  bool stochastic_interpolation = false;
  // Parameter gradients summed in an order-independent way (bitwise repeatable on GPUs, where the
  // fast path adds with float atomics). The CPU backend is deterministic either way.
  bool deterministic = false;
  // tiny-cuda-nn's fixed_point_pos: its JIT-fused kernels then read each position as a 32-bit
  // fixed-point number stored in the float's bits; its other kernels, like every kernel here, read
  // floats whatever it says. tinyfuse has no JIT fusion, so the key is kept (hyperparams) and
  // changes nothing.
  bool fixed_point_pos = false;

  // Per level: position scale (float, as the kernels use it), vertices per axis, and the first
  // table entry; level_offset has n_levels + 1 items, the last being the total entry count.
  // Level l owns parameters [level_offset[l] * F, level_offset[l + 1] * F), entry-major with
  // the F features of an entry adjacent.
  std::vector<float> level_scale;
  std::vector<uint32_t> level_resolution;
  std::vector<uint32_t> level_offset;

  uint32_t n_output_dims() const { return n_levels * n_features_per_level; }
  uint32_t level_table_size(uint32_t level) const { return level_offset[level + 1] - level_offset[level]; }
  size_t n_params() const { return static_cast<size_t>(level_offset.back()) * n_features_per_level; }
};

// The otypes that name a grid encoding; the first is canonical.
const std::vector<std::string>& grid_otypes();

std::string to_string(GridType t);
std::string to_string(GridHash h);
std::string to_string(GridInterpolation i);

// Parses and checks `config` (whose otype is one of grid_otypes()); `path` names it in
// ConfigErrors. n_input_dims must be 1 to 4.
GridSpec parse_grid_config(const json& config, const std::string& path, uint32_t n_input_dims);

// Fills the derived per-level tables of `spec` from its settings (parse_grid_config calls it).
// Throws ConfigError, blaming `path`, when the layout does not fit uint32 offsets.
void resolve_grid_layout(GridSpec& spec, const std::string& path);

// tiny-cuda-nn's hyperparams() of a grid: canonical keys, otype "Grid", loadable again.
json grid_hyperparams(const GridSpec& spec);

// One Grid segment per level, where that level's parameters sit.
std::vector<ParamSegment> grid_param_segments(const GridSpec& spec);

// tiny-cuda-nn's GPU uniform fill, reproduced on the host: `n` values in [lo, hi) written in the
// order its generate_random kernel writes them (launched thread i of L = 128 * ceil(ceil(n / 4)
// / 128) takes draws 4i..4i+3 for elements i, i + L, i + 2L, i + 3L), leaving `rng` advanced by n
// draws as tiny-cuda-nn leaves it. So a seed gives tiny-cuda-nn's initial grid.
void fill_uniform_tcnn_order(Pcg32& rng, size_t n, float* out, float lo, float hi);

// tiny-cuda-nn's grid initialisation, for every backend: uniform in +-1e-4 * scale, in its GPU
// fill order, into a host buffer of spec.n_params() floats.
void grid_initialize_params(const GridSpec& spec, Pcg32& rng, float* params_host, float scale);

}  // namespace tinyfuse
