// The Trainer on the CPU: it learns, refuses non-finite steps without touching the parameters,
// and is deterministic.
#include <gtest/gtest.h>

#include <cmath>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

json small_config(const std::string& optimizer = "Adam") {
  return {{"loss", {{"otype", "L2"}}},
          {"optimizer", {{"otype", optimizer}, {"learning_rate", 1e-2}}},
          {"network", {{"otype", "PortableMLP"}, {"n_neurons", 32}, {"n_hidden_layers", 2}, {"activation", "Tanh"}}}};
}

// Target: a smooth 2-D -> 1-D function.
void make_batch(Pcg32& rng, int64_t batch, std::vector<float>& x, std::vector<float>& y) {
  x.resize(batch * 2);
  y.resize(batch);
  for (int64_t b = 0; b < batch; ++b) {
    x[2 * b] = rng.next_float() * 2 - 1;
    x[2 * b + 1] = rng.next_float() * 2 - 1;
    y[b] = std::sin(3 * x[2 * b]) * std::cos(2 * x[2 * b + 1]);
  }
}

std::vector<float> train(int steps, uint64_t seed, std::vector<float>* losses = nullptr) {
  Model m = create_from_config(2, 1, small_config(), {}, seed);
  Pcg32 rng(1);
  std::vector<float> x, y;
  for (int i = 0; i < steps; ++i) {
    make_batch(rng, 256, x, y);
    float loss = m.trainer->training_step(TensorView::matrix(x.data(), 256, 2), TensorView::matrix(y.data(), 256, 1));
    if (losses) losses->push_back(loss);
  }
  return m.trainer->params_host();
}

TEST(Trainer, LossDecreases) {
  std::vector<float> losses;
  train(300, 1337, &losses);
  float first = 0, last = 0;
  for (int i = 0; i < 20; ++i) first += losses[i], last += losses[losses.size() - 1 - i];
  EXPECT_LT(last, first * 0.1f) << "first " << first / 20 << " last " << last / 20;
}

TEST(Trainer, DeterministicForASeed) {
  EXPECT_EQ(train(20, 7), train(20, 7));
  EXPECT_NE(train(1, 7), train(1, 8));
}

TEST(Trainer, NonFiniteLossSkipsTheStepAndKeepsParameters) {
  Model m = create_from_config(2, 1, small_config(), {}, 3);
  std::vector<float> x(2 * 8, 0.5f), y(8, 0.0f);
  y[3] = NAN;
  const auto before = m.trainer->params_host();
  EXPECT_THROW(m.trainer->training_step(TensorView::matrix(x.data(), 8, 2), TensorView::matrix(y.data(), 8, 1)), Error);
  EXPECT_EQ(m.trainer->params_host(), before);
  y[3] = 0;
  EXPECT_NO_THROW(m.trainer->training_step(TensorView::matrix(x.data(), 8, 2), TensorView::matrix(y.data(), 8, 1)));
  EXPECT_NE(m.trainer->params_host(), before);
}

TEST(Trainer, RejectsWrongTargetsAndEmptyBatches) {
  Model m = create_from_config(2, 1, small_config(), {}, 3);
  std::vector<float> x(16), y(16);
  EXPECT_THROW(m.trainer->training_step(TensorView::matrix(x.data(), 8, 2), TensorView::matrix(y.data(), 8, 2)), ShapeError);
  EXPECT_THROW(m.trainer->training_step(TensorView::matrix(x.data(), 8, 2), TensorView::matrix(y.data(), 7, 1)), ShapeError);
  EXPECT_THROW(m.trainer->training_step(TensorView::matrix(x.data(), 0, 2), TensorView::matrix(y.data(), 0, 1)), ShapeError);
}

TEST(Trainer, SetParamsRoundTrip) {
  Model m = create_from_config(2, 1, small_config(), {}, 3);
  auto p = m.trainer->params_host();
  for (auto& v : p) v *= 0.5f;
  m.trainer->set_params_host(p);
  EXPECT_EQ(m.trainer->params_host(), p);
  p.pop_back();
  EXPECT_THROW(m.trainer->set_params_host(p), ShapeError);
}

TEST(Trainer, LossScaleIsOneForFp32) {
  Model m = create_from_config(2, 1, small_config(), {}, 3);
  EXPECT_EQ(m.trainer->loss_scale(), 1.0f);
}

}  // namespace
