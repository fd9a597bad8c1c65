// tiny-cuda-nn's own sample configs build and train here unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

// tiny-cuda-nn's data/config_hash.json, key for key.
const char* kConfigHash = R"({
  "loss": {"otype": "RelativeL2"},
  "optimizer": {"otype": "Adam", "learning_rate": 1e-2, "beta1": 0.9, "beta2": 0.99, "epsilon": 1e-15, "l2_reg": 1e-6},
  "encoding": {"otype": "HashGrid", "n_levels": 16, "n_features_per_level": 2, "log2_hashmap_size": 15,
               "base_resolution": 16, "per_level_scale": 1.5},
  "network": {"otype": "FullyFusedMLP", "activation": "ReLU", "output_activation": "None", "n_neurons": 64,
              "n_hidden_layers": 2}
})";

// A 2-D -> RGB target with detail at several scales.
void sample(Pcg32& rng, int64_t batch, std::vector<float>& x, std::vector<float>& y) {
  x.resize(batch * 2);
  y.resize(batch * 3);
  for (int64_t b = 0; b < batch; ++b) {
    const float u = rng.next_float(), v = rng.next_float();
    x[2 * b] = u;
    x[2 * b + 1] = v;
    y[3 * b] = 0.5f + 0.5f * std::sin(20 * u);
    y[3 * b + 1] = 0.5f + 0.5f * std::cos(13 * v + 5 * u);
    y[3 * b + 2] = (u - 0.5f) * (u - 0.5f) + (v - 0.5f) * (v - 0.5f) < 0.1f ? 1.0f : 0.1f;
  }
}

TEST(TcnnSamples, HashGridFullyFusedConfigTrains) {
  Model m = create_from_config(2, 3, json::parse(kConfigHash));
  EXPECT_EQ(m.network->padded_output_width(), 16u);
  Pcg32 rng(1);
  std::vector<float> x, y, losses;
  const int64_t batch = 4096;
  for (int step = 0; step < 60; ++step) {
    sample(rng, batch, x, y);
    losses.push_back(m.trainer->training_step(TensorView::matrix(x.data(), batch, 2), TensorView::matrix(y.data(), batch, 3)));
  }
  std::vector<float> early(losses.begin() + 2, losses.begin() + 12), late(losses.end() - 10, losses.end());
  std::sort(early.begin(), early.end());
  std::sort(late.begin(), late.end());
  EXPECT_LT(late[5], 0.2f * early[5]) << "median loss of steps 2-11: " << early[5] << ", of the last 10: " << late[5];
}

}  // namespace
