// The fused kernels' activations element by element (src/cuda/fused/fused_activation_math.cuh:
// the hardware exp / log / divide for the smooth ones): act(z) and act'(z) at every FP16 / BF16
// value z in [-8, 8], through FullyFusedMLP networks whose two weight matrices are identities, so
// the output is round_T(act(z)) and dL/dinput with dL/doutput = 1 is round_T(act'(z)), every
// product exact. Widths 16 (pipelined kernels) and 64 (the Hopper inference kernel on sm_90).
//
// Bound: within one unit in the last place of T of the FP64 value, plus 2^-21 * max(1, |value|)
// for what FP32 arithmetic cannot resolve near a zero of the function or in a cancellation
// (Squareplus below 0, SiLU' near its root, 1 - sigmoid near 1), about 16 units of FP32's
// roundoff. The hardware functions' own errors (2^-21 relative for exp and divide, 2^-21.4
// absolute for log on [1, 2]) fit it; a wrong formula, branch or constant does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/activation_math.h"
#include "core/half.h"
#include "testing/device_matrix.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
using tinyfuse::testing::DeviceMatrix;
using tinyfuse::testing::download;
using tinyfuse::testing::upload;

namespace {

class FusedActivations : public ::testing::TestWithParam<std::tuple<DType, int, std::string>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

const char* precision_name(DType p) { return p == DType::BF16 ? "bf16" : "f16"; }

// The spacing of T's values at |v| (its subnormal spacing below the smallest normal).
double ulp(DType p, double v) {
  const int mantissa_bits = p == DType::BF16 ? 7 : 10;
  const int min_exponent = p == DType::BF16 ? -126 : -14;
  const double a = std::abs(v);
  const int e = a > 0 ? std::max(static_cast<int>(std::floor(std::log2(a))), min_exponent) : min_exponent;
  return std::ldexp(1.0, e - mantissa_bits);
}

// Every value of T in [-8, 8], ascending.
std::vector<double> all_values(DType p) {
  std::vector<double> v;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const double x = p == DType::BF16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
    if (std::isfinite(x) && std::abs(x) <= 8.0 && !(x == 0 && std::signbit(x))) v.push_back(x);
  }
  std::sort(v.begin(), v.end());
  return v;
}

struct Worst {
  double excess = -1, z = 0, got = 0, want = 0;  // excess: error / bound, the largest seen
  int64_t beyond = 0;
};

void check(Worst& w, DType p, double z, double got, double want) {
  const double bound = ulp(p, want) + std::ldexp(std::max(1.0, std::abs(want)), -21);
  const double err = std::isnan(got) ? INFINITY : std::abs(got - want);
  if (err > bound) ++w.beyond;
  if (err / bound > w.excess) w = {err / bound, z, got, want, w.beyond};
}

TEST_P(FusedActivations, WithinOneUnitOfTheStorageType) {
  const auto [p, width, name] = GetParam();
  const Activation act = parse_activation(name, "activation");
  const json config = {{"otype", "FullyFusedMLP"}, {"n_neurons", width}, {"n_hidden_layers", 1},
                       {"activation", name},       {"output_activation", "None"},
                       {"precision", precision_name(p)}};
  auto net = create_network(config, width, width, BuildOptions{Device::CUDA});
  ASSERT_EQ(net->padded_output_width(), static_cast<uint32_t>(width));

  std::vector<double> params(net->n_params(), 0.0);
  for (const ParamSegment& s : net->param_segments())
    for (uint32_t i = 0; i < std::min(s.fan_in, s.fan_out); ++i) params[s.offset + static_cast<size_t>(i) * s.fan_in + i] = 1.0;
  Buffer pbuf(Device::CUDA, params.size() * dtype_size(p)), gbuf(Device::CUDA, params.size() * dtype_size(p));
  const TensorView pview = pbuf.vector(p, params.size()), gview = gbuf.vector(p, params.size());
  upload(pview, params);
  net->set_params(pview, pview, gview);

  const std::vector<double> values = all_values(p);
  const int64_t batch = (static_cast<int64_t>(values.size()) + width - 1) / width;
  std::vector<double> input(static_cast<size_t>(batch * width), 0.0);
  std::copy(values.begin(), values.end(), input.begin());
  DeviceMatrix in(p, batch, width, false), out(p, batch, width, false), dy(p, batch, width, false), dx(p, batch, width, false);
  upload(in.view, input);
  upload(dy.view, std::vector<double>(input.size(), 1.0));

  out.poison();
  net->inference(in.view, out.view);
  const std::vector<double> got_inf = download(out.view);
  out.poison();
  auto ctx = net->forward(in.view, &out.view);
  const std::vector<double> got_fwd = download(out.view);
  dx.poison();
  net->backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Ignore);
  const std::vector<double> got_dx = download(dx.view);

  Worst wa, wd;
  int64_t inference_differs = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double z = values[i];
    check(wa, p, z, got_fwd[i], activate(act, z));
    check(wd, p, z, got_dx[i], activate_derivative(act, z));
    inference_differs += !(got_inf[i] == got_fwd[i]);
  }
  EXPECT_EQ(inference_differs, 0) << "inference and forward differ";
  EXPECT_EQ(wa.beyond, 0) << name << "(z) beyond the bound at " << wa.beyond << " of " << values.size()
                          << " values; worst at z = " << wa.z << ": " << wa.got << " against " << wa.want;
  EXPECT_EQ(wd.beyond, 0) << name << "'(z) beyond the bound at " << wd.beyond << " of " << values.size()
                          << " values; worst at z = " << wd.z << ": " << wd.got << " against " << wd.want;
  // What the margin left (printed, so that a loosening of the kernels' accuracy shows before it fails).
  std::printf("[ fused activation ] %s %s width %d: worst error / bound %.3f (act), %.3f (act')\n", name.c_str(),
              precision_name(p), width, wa.excess, wd.excess);
}

INSTANTIATE_TEST_SUITE_P(
    All, FusedActivations,
    ::testing::Combine(::testing::Values(DType::F16, DType::BF16), ::testing::Values(16, 64),
                       ::testing::Values("ReLU", "LeakyReLU", "SiLU", "Exponential", "Sine", "Sigmoid", "Squareplus",
                                         "Softplus", "Tanh")),
    [](const auto& info) {
      return std::string(precision_name(std::get<0>(info.param))) + "_w" +
             std::to_string(std::get<1>(info.param)) + "_" + std::get<2>(info.param);
    });

}  // namespace
