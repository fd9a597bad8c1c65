// What the CPU derivative tests of the networks share (test_mlp.cpp: first derivatives;
// test_second_derivatives.cpp: second): the FP64 reference build, a network config, and the
// shapes they check.
#pragma once

#include <cstdint>
#include <string>

#include "tinyfuse/tinyfuse.h"

namespace tinyfuse::testing {

inline const BuildOptions kF64{Device::CPU, DType::F64};

inline json net_config(const std::string& otype, uint32_t neurons, uint32_t hidden, const std::string& act,
                       const std::string& out_act) {
  return {{"otype", otype}, {"n_neurons", neurons}, {"n_hidden_layers", hidden}, {"activation", act}, {"output_activation", out_act}};
}

struct MlpShape {
  std::string otype;
  uint32_t in, neurons, hidden, out;
};

// Biases and none (FullyFusedMLP, CutlassMLP), depth 0 and deep, output padding, odd widths.
inline const MlpShape kMlpShapes[] = {
    {"PortableMLP", 3, 8, 2, 5},
    {"PortableMLP", 4, 6, 0, 3},
    {"FullyFusedMLP", 16, 16, 1, 3},
    {"CutlassMLP", 5, 7, 3, 2},
};

}  // namespace tinyfuse::testing
