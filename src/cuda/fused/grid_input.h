// A grid encoding as the fused grid -> MLP inference reads it (general/grid_layer0.cuh): the
// network's first layer takes its input features straight from the grid's table, evaluated in
// registers, instead of from a feature matrix the grid's own kernel wrote. Plain C++.
#pragma once

#include <cstdint>

#include "cuda/encodings/grid_launch.h"

namespace tinyfuse::cuda::fused {

struct GridInput {
  grid::Launch g{};
  uint32_t dims = 0;              // 0: no grid (the network reads its input matrix)
  const void* params = nullptr;   // the table: FP16, two features an entry
  bool vec = false, pairs = false;  // the table aligned to an entry's 4 bytes / to 16 bytes
  const float* x = nullptr;       // the grid's input positions (batch x dims) FP32
  int64_t ldx = 0;
};

}  // namespace tinyfuse::cuda::fused
