// Two models trained from two threads at once on the CPU backend end bitwise where they end when
// trained one after the other: the worker pool, OpenBLAS and the per-thread scratch buffers
// share nothing that changes results (docs/ARCHITECTURE.md, "Threads").
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

// Batches large enough that elementwise work and the grid are split into several chunks.
constexpr int64_t kBatch = 1024;
constexpr int kSteps = 8;

struct Job {
  json config;
  uint32_t n_in, n_out;
  uint64_t seed;
};

const std::vector<Job>& jobs() {
  static const std::vector<Job> j = {
      {{{"loss", {{"otype", "L2"}}},
        {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-2}}},
        {"encoding", {{"otype", "HashGrid"}, {"n_levels", 8}, {"log2_hashmap_size", 12}, {"base_resolution", 8}}},
        {"network", {{"otype", "PortableMLP"}, {"n_neurons", 64}, {"n_hidden_layers", 2}}}},
       2, 3, 11},
      {{{"loss", {{"otype", "RelativeL2"}}},
        {"optimizer", {{"otype", "EMA"}, {"decay", 0.9}, {"nested", {{"otype", "Adam"}, {"learning_rate", 1e-3}}}}},
        {"encoding", {{"otype", "Frequency"}, {"n_frequencies", 4}}},
        {"network", {{"otype", "CutlassMLP"}, {"n_neurons", 32}, {"n_hidden_layers", 3}, {"activation", "Tanh"}}}},
       3, 1, 22},
  };
  return j;
}

struct Result {
  std::vector<float> losses, params, inference;
};

// Trains a fresh model of `job` on data drawn from its own seed; returns its loss curve, its
// parameters and its inference output on a fixed batch.
Result run(const Job& job) {
  Model m = create_from_config(job.n_in, job.n_out, job.config, {}, job.seed);
  Pcg32 rng(job.seed);
  std::vector<float> x(kBatch * job.n_in), y(kBatch * job.n_out);
  Result r;
  for (int s = 0; s < kSteps; ++s) {
    for (auto& v : x) v = rng.next_float();
    for (size_t i = 0; i < y.size(); ++i) y[i] = 0.5f + 0.4f * std::sin(7.0f * x[i % x.size()]);
    r.losses.push_back(m.trainer->training_step(TensorView::matrix(x.data(), kBatch, job.n_in),
                                                TensorView::matrix(y.data(), kBatch, job.n_out)));
  }
  r.params = m.trainer->params_host();
  r.inference.resize(kBatch * m.network->padded_output_width());
  m.network->inference(TensorView::matrix(x.data(), kBatch, job.n_in),
                       TensorView::matrix(r.inference.data(), kBatch, m.network->padded_output_width()));
  return r;
}

void expect_bitwise_equal(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " differ";
}

void expect_same(const Result& a, const Result& b) {
  expect_bitwise_equal(a.losses, b.losses, "losses");
  expect_bitwise_equal(a.params, b.params, "parameters");
  expect_bitwise_equal(a.inference, b.inference, "inference outputs");
}

TEST(Threads, TwoModelsAtOnceTrainAsOneAfterTheOther) {
  std::vector<Result> sequential;
  for (const Job& j : jobs()) sequential.push_back(run(j));
  EXPECT_NE(sequential[0].losses.front(), sequential[0].losses.back()) << "the models must actually train";
  // A few rounds: a race that shows only sometimes gets more chances to show.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<Result> concurrent(jobs().size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < jobs().size(); ++i) threads.emplace_back([&, i] { concurrent[i] = run(jobs()[i]); });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < jobs().size(); ++i) expect_same(concurrent[i], sequential[i]);
  }
}

TEST(Threads, TheSameConfigInTwoThreadsGivesTheSameModelTwice) {
  const Result alone = run(jobs()[0]);
  Result a, b;
  std::thread ta([&] { a = run(jobs()[0]); }), tb([&] { b = run(jobs()[0]); });
  ta.join();
  tb.join();
  expect_same(a, alone);
  expect_same(b, alone);
}

}  // namespace
