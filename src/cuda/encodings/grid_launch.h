// The grid's launch description in plain C++: what every grid kernel takes by value, and what a
// fused network kernel takes to evaluate a grid's features itself (fused/grid_input.h).
#pragma once

#include <cstdint>

#include "core/encodings/grid_math.h"

namespace tinyfuse::cuda::grid {

// One level as the kernels need it (a device array of these, uploaded once per encoding).
struct LevelInfo {
  float scale;          // position scale, float as the CPU uses it
  uint32_t resolution;  // vertices per axis
  uint32_t offset;      // first table entry of the level
  uint32_t size;        // table entries of the level
};

// The settings every kernel takes by value.
struct Launch {
  GridType type;
  GridHash hash;
  GridInterpolation interpolation;
  bool stochastic;
  uint32_t n_levels;
  const LevelInfo* levels;  // device, n_levels items
};

}  // namespace tinyfuse::cuda::grid
