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

}  // namespace tinyfuse::testing
