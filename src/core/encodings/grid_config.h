// Reading a Grid encoding config ("Grid", "HashGrid", "DenseGrid", "TiledGrid") into a
// device-neutral description with tiny-cuda-nn's parameter layout resolved, so every backend
// agrees on what is accepted and where each level's parameters sit.
#pragma once

#include <string>
#include <vector>

#include "core/encodings/grid_math.h"
#include "tinyfuse/object.h"

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

}  // namespace tinyfuse
