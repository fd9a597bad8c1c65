// What the tests of FullyFusedMLP's folded training paths share (test_fused_loss.cpp: the loss in
// the forward; test_fused_train_step.cpp: the whole pass in one kernel): the network case, its
// config and name, whether the device runs the sm_90 kernels, and the bitwise comparison.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/fused/fully_fused_mlp.h"
#include "testing/device_matrix.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

namespace tinyfuse::testing {

// A FullyFusedMLP: precision, input width, hidden width, hidden layers, target columns (the
// network pads its output to 16), activations.
struct FusedPassCase {
  DType precision;
  uint32_t in, width, hidden, dims;
  std::string act = "ReLU", out_act = "None";
};

inline std::string describe(const FusedPassCase& c, const std::string& loss, int64_t batch) {
  return std::string(c.precision == DType::BF16 ? "bf16 " : "f16 ") + std::to_string(c.in) + "->" + std::to_string(c.width) +
         "x" + std::to_string(c.hidden) + "->" + std::to_string(c.dims) + " " + c.act + "/" + c.out_act + " " + loss +
         " batch " + std::to_string(batch);
}

inline json network_config(const FusedPassCase& c) {
  return {{"otype", "FullyFusedMLP"},     {"n_neurons", c.width},  {"n_hidden_layers", c.hidden},
          {"activation", c.act},          {"output_activation", c.out_act},
          {"precision", c.precision == DType::BF16 ? "bf16" : "f16"}};
}

inline bool sm90_or_newer() {
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major >= 9;
}

// Same bits and no NaN (FP16 / BF16 / FP32 -> double is exact); `got_is` / `want_is` name the two
// paths in the failure message.
inline ::testing::AssertionResult same_bits(const std::vector<double>& got, const std::vector<double>& want,
                                            const char* what, const char* got_is, const char* want_is) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::isnan(got[i]) || std::isnan(want[i]) || std::memcmp(&got[i], &want[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << what << ", element " << i << ": " << got[i] << " (" << got_is << ") vs "
                                           << want[i] << " (" << want_is << ")";
  return ::testing::AssertionSuccess();
}

// Ten Trainer steps (Adam) of a FullyFusedMLP 64 x 2 -> 7, alone (input 32 wide) or behind an
// encoding of `n_input` dims that makes 32 features (Identity, or a deterministic HashGrid, whose
// table the encoding's backward trains from the network's dL/dinput), on seeded batches, its kernels
// as `options` allow: the losses, the final FP32 parameters and the kernels the last step ran.
struct TrainerRun {
  std::vector<float> losses, params;
  std::shared_ptr<DifferentiableObject> model;
  cuda::fused::FusedKernel kernel_of(cuda::fused::FusedPass pass) const { return cuda::fused_kernel_used(*model, pass); }
};
inline TrainerRun ten_trainer_steps(const json* encoding, uint32_t n_input, const BuildOptions& options,
                                    const char* loss = "L2") {
  const json net_cfg = {{"otype", "FullyFusedMLP"}, {"n_neurons", 64}, {"n_hidden_layers", 2},
                        {"activation", "ReLU"},    {"output_activation", "None"}};
  std::shared_ptr<DifferentiableObject> model;
  if (encoding)
    model = create_network_with_input_encoding(n_input, 7, *encoding, net_cfg, options);
  else
    model = create_network(net_cfg, n_input, 7, options);
  Trainer trainer(model, create_optimizer({{"otype", "Adam"}, {"learning_rate", 1e-2}}, BuildOptions{Device::CUDA}),
                  create_loss({{"otype", loss}}, BuildOptions{Device::CUDA}), 31);
  const int64_t batch = 4099;
  Pcg32 rng(5);
  DeviceMatrix in(model->input_dtype(), batch, n_input, false), tgt(DType::F32, batch, 7, false);
  TrainerRun run;
  for (int step = 0; step < 10; ++step) {
    std::vector<double> x(batch * n_input), y(batch * 7);
    for (auto& v : x) v = rng.next_double();
    for (auto& v : y) v = std::sin(3 * v + rng.next_double());
    upload(in.view, x);
    upload(tgt.view, y);
    run.losses.push_back(trainer.training_step(in.view, tgt.view));
  }
  run.params = trainer.params_host();
  run.model = model;
  return run;
}
inline TrainerRun ten_trainer_steps(bool with_encoding, const BuildOptions& options) {
  const json identity = {{"otype", "Identity"}};
  return ten_trainer_steps(with_encoding ? &identity : nullptr, 32, options);
}
// A deterministic HashGrid for ten_trainer_steps: 2-D, 16 levels x 2 features (32 wide, as W1's),
// its fixed-point gradient sums the same bits in any order.
inline json deterministic_grid() {
  return {{"otype", "HashGrid"}, {"n_levels", 16}, {"n_features_per_level", 2}, {"log2_hashmap_size", 12},
          {"base_resolution", 4},  {"per_level_scale", 1.5}, {"deterministic", true}};
}

// Every loss and every parameter the same bits.
inline void expect_same_runs(const TrainerRun& got, const TrainerRun& want, const char* got_is) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i)
    EXPECT_EQ(std::memcmp(&got.losses[i], &want.losses[i], sizeof(float)), 0)
        << "step " << i << " loss " << got.losses[i] << " (" << got_is << ") vs " << want.losses[i];
  ASSERT_EQ(got.params.size(), want.params.size());
  EXPECT_EQ(std::memcmp(got.params.data(), want.params.data(), got.params.size() * sizeof(float)), 0)
      << "parameters after ten steps differ";
}

}  // namespace tinyfuse::testing
