// The small models the checkpoint fuzzer loads into, and the seed checkpoints are saved from: a
// plain MLP with Adam, a hash grid in front of a CutlassMLP with EMA, and a Composite encoding
// with ExponentialDecay over SGD, so every optimizer state layout is reachable.
#pragma once

#include <vector>

#include "tinyfuse/tinyfuse.h"

namespace tinyfuse::fuzz {

struct FuzzModel {
  uint32_t n_input_dims, n_output_dims;
  json config;
};

inline const std::vector<FuzzModel>& checkpoint_models() {
  static const std::vector<FuzzModel> models = {
      {2, 1,
       {{"loss", {{"otype", "L2"}}},
        {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-2}}},
        {"network", {{"otype", "PortableMLP"}, {"n_neurons", 8}, {"n_hidden_layers", 1}, {"activation", "Tanh"}}}}},
      {2, 3,
       {{"loss", {{"otype", "RelativeL2"}}},
        {"optimizer", {{"otype", "EMA"}, {"decay", 0.9}, {"nested", {{"otype", "Adam"}, {"learning_rate", 1e-2}}}}},
        {"encoding", {{"otype", "HashGrid"}, {"n_levels", 2}, {"n_features_per_level", 2}, {"log2_hashmap_size", 5},
                      {"base_resolution", 4}, {"per_level_scale", 2.0}}},
        {"network", {{"otype", "CutlassMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}}}}},
      {3, 2,
       {{"loss", {{"otype", "L1"}}},
        {"optimizer",
         {{"otype", "ExponentialDecay"}, {"decay_start", 2}, {"decay_interval", 2}, {"decay_base", 0.5},
          {"nested", {{"otype", "SGD"}, {"learning_rate", 1e-2}}}}},
        {"encoding",
         {{"otype", "Composite"},
          {"nested", {{{"n_dims_to_encode", 1}, {"otype", "Frequency"}, {"n_frequencies", 2}}, {{"otype", "OneBlob"}, {"n_bins", 4}}}}}},
        {"network", {{"otype", "PortableMLP"}, {"n_neurons", 8}, {"n_hidden_layers", 1}}}}},
  };
  return models;
}

// A few steps of training, so that the optimizer state is not all zeros.
inline void train_a_little(Model& m, uint32_t n_in, uint32_t n_out, int steps) {
  std::vector<float> x(16 * n_in), y(16 * n_out);
  Pcg32 rng(7);
  for (int s = 0; s < steps; ++s) {
    for (auto& v : x) v = rng.next_float();
    for (auto& v : y) v = rng.next_float();
    m.trainer->training_step(TensorView::matrix(x.data(), 16, n_in), TensorView::matrix(y.data(), 16, n_out));
  }
}

}  // namespace tinyfuse::fuzz
