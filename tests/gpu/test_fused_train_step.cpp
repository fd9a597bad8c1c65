// FullyFusedMLP's forward_backward_with_loss in one kernel (src/cuda/fused/pipelined/train_step_kernel.cuh)
// against the same pass as two calls: forward_with_loss (the L2, RelativeL2 or L1 loss folded into the pipelined
// forward) and backward() (the backward that forms the weight gradients inside). The one kernel
// computes every value as those two do and sums the weight gradients in the same order on the
// same grid (one block per SM for both), so per-row loss values and parameter gradients must be
// the same bits. Those two kernels are checked against the CPU FP64 reference and the separate
// weight-gradient kernels elsewhere (test_fully_fused_mlp.cpp, test_fused_pipelined.cpp,
// test_fused_loss.cpp); the Trainer against the CPU trainer in test_qualification.cpp, whose
// 64-wide FullyFusedMLP now trains through this kernel.
// Outputs are poisoned with NaN first, so an element the kernel skipped cannot pass. On sm_90+ the
// kernel must have run exactly where it applies (the network says which ran): L2, RelativeL2 or L1, 64 wide, ReLU,
// 1 or 2 hidden layers, input 32 or 64, an identity output or (padded to at most 32 columns) another
// output activation; elsewhere the default path runs, with the same bits.
// Shapes: padded outputs 16 to 64 (48: six 8-column groups, which the lanes' walk does not divide
// evenly), targets narrower than the padded output, batches from 1 row to many rounds of tiles,
// the last tile and round partial. Runs on the device machine; skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda/fused/fully_fused_mlp.h"
#include "gpu/fused_pass_cases.h"
#include "testing/device_matrix.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
using tinyfuse::testing::DeviceMatrix;
using tinyfuse::testing::download;
using tinyfuse::testing::upload;
namespace fz = tinyfuse::cuda::fused;
using tinyfuse::testing::describe;
using tinyfuse::testing::network_config;
using tinyfuse::testing::sm90_or_newer;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using StepCase = tinyfuse::testing::FusedPassCase;

// The one kernel against the two calls.
::testing::AssertionResult same_bits(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  return tinyfuse::testing::same_bits(got, want, what, "one kernel", "two calls");
}

// Whether the one kernel takes this case (plan_pipelined_train_step).
bool kernel_applies(const StepCase& c, const std::string& loss) {
  const uint32_t padded_out = (c.dims + 15) / 16 * 16;
  return sm90_or_newer() && (loss == "L2" || loss == "RelativeL2" || loss == "L1") && c.width == 64 && c.act == "ReLU" &&
         (c.out_act == "None" || padded_out <= 32) && (c.in == 32 || c.in == 64) && c.hidden <= 2;
}

std::vector<int64_t> batches() {
  if (const char* q = std::getenv("TINYFUSE_QUICK"); q && *q == '1') return {1, 33, 4097};
  // 32 rows per warp tile, 8 tiles per round, one block per SM: 1, 31..33 (one tile and a bit),
  // 255..257 (one round and a bit), 70,001 (many rounds, the last partial), 2^20 + 3.
  return {1, 31, 32, 33, 255, 256, 257, 4097, 70001, (1 << 20) + 3};
}

class FusedTrainStep : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    if (const char* e = std::getenv("TINYFUSE_FUSED_KERNELS"); e && std::strcmp(e, "general") == 0)
      GTEST_SKIP() << "TINYFUSE_FUSED_KERNELS=general leaves the one-kernel pass out";
  }
};

// A network that may run the pass in one kernel, or not (then as forward_with_loss and backward).
BuildOptions one_kernel_step(bool on) {
  BuildOptions o{Device::CUDA};
  o.fused_kernels.one_kernel_step = on;
  return o;
}

struct PassResult {
  std::vector<double> values, param_grads;
  bool one_kernel = false;  // the one-kernel pass ran
};

// forward_backward_with_loss; parameter gradients start as `start` (NaN for Overwrite). With
// `dinput` given, dL/dinput too, into a poisoned matrix (rows further apart than their width where
// `strided_dinput`), downloaded there.
PassResult run(Network& net, const Loss& loss, const TensorView& in, const TensorView& target, const TensorView* pdf,
               const TensorView& param_grads, GradientMode mode, double start, std::vector<double>* dinput = nullptr,
               bool strided_dinput = false) {
  const int64_t batch = in.rows();
  const DType p = net.output_dtype();
  const uint32_t W = net.padded_output_width();
  DeviceMatrix out(p, batch, W, false), grads(p, batch, W, false), values(DType::F32, batch, 1, false);
  DeviceMatrix din(net.input_dtype(), batch, net.input_width(), strided_dinput);
  out.poison();
  grads.poison();
  values.poison();
  din.poison();
  fill_tensor(param_grads, start);
  PassResult r;
  net.forward_backward_with_loss(in, out.view, loss, 128.0f, target, values.view, grads.view, pdf, mode,
                                 dinput ? &din.view : nullptr);
  r.one_kernel = cuda::fused_kernel_used(net, fz::FusedPass::TrainStep) == fz::FusedKernel::PipelinedTrainStep;
  r.values = download(values.view);
  r.param_grads = download(param_grads);
  if (dinput) *dinput = download(din.view);
  return r;
}

// The case's two networks (one kernel allowed, and not) on the same parameters and data.
struct Fixture {
  std::unique_ptr<Network> net, two_calls;
  Buffer pbuf, gbuf;
  TensorView pview, gview;
  DeviceMatrix in, tgt;
  Fixture(const StepCase& c, int64_t batch, uint64_t seed, bool strided_target = false)
      : net(create_network(network_config(c), c.in, c.dims, one_kernel_step(true))),
        two_calls(create_network(network_config(c), c.in, c.dims, one_kernel_step(false))),
        in(c.precision, batch, c.in, false),
        tgt(DType::F32, batch, c.dims, strided_target) {
    const size_t n = net->n_params();
    const DType p = c.precision;
    Pcg32 rng(seed);
    std::vector<float> init(n);
    net->initialize_params(rng, init.data());
    pbuf = Buffer(Device::CUDA, n * dtype_size(p));
    gbuf = Buffer(Device::CUDA, n * dtype_size(p));
    pview = pbuf.vector(p, n);
    gview = gbuf.vector(p, n);
    upload(pview, std::vector<double>(init.begin(), init.end()));
    net->set_params(pview, pview, gview);
    two_calls->set_params(pview, pview, gview);
    std::vector<double> input(batch * c.in), target(batch * c.dims);
    for (auto& x : input) x = 2 * rng.next_double() - 1;
    for (auto& x : target) x = c.out_act == "Sigmoid" ? rng.next_double() : 2 * rng.next_double() - 1;
    upload(in.view, input);
    upload(tgt.view, target);
  }
};

TEST_F(FusedTrainStep, SameBitsAsTwoCalls) {
  const StepCase cases[] = {
      {DType::F16, 64, 64, 2, 64},  {DType::BF16, 64, 64, 2, 64}, {DType::F16, 32, 64, 1, 3},
      {DType::BF16, 32, 64, 2, 40}, {DType::F16, 64, 64, 1, 17},  {DType::F16, 32, 64, 2, 32},
      // Output activations (z kept beside the output on chip): a NeRF colour network's Sigmoid,
      // Tanh and Softplus, 16 and 32 padded columns.
      {DType::F16, 32, 64, 2, 3, "ReLU", "Sigmoid"},   {DType::BF16, 64, 64, 1, 32, "ReLU", "Sigmoid"},
      {DType::F16, 64, 64, 2, 24, "ReLU", "Tanh"},     {DType::BF16, 32, 64, 2, 16, "ReLU", "Softplus"},
  };
  uint64_t seed = 4400;
  for (const StepCase& c : cases)
    for (int64_t batch : batches())
      for (const char* name : {"L2", "RelativeL2", "L1"}) {  // the losses the kernel folds
        SCOPED_TRACE(describe(c, name, batch));
        Fixture f(c, batch, seed++);
        auto loss = create_loss({{"otype", name}}, BuildOptions{Device::CUDA});
        const PassResult want =
            run(*f.two_calls, *loss, f.in.view, f.tgt.view, nullptr, f.gview, GradientMode::Overwrite, kNaN);
        EXPECT_FALSE(want.one_kernel) << "switched off, the one kernel ran";
        const PassResult got = run(*f.net, *loss, f.in.view, f.tgt.view, nullptr, f.gview, GradientMode::Overwrite, kNaN);
        EXPECT_EQ(got.one_kernel, kernel_applies(c, name)) << "which path ran";
        EXPECT_TRUE(same_bits(got.values, want.values, "per-row loss values"));
        EXPECT_TRUE(same_bits(got.param_grads, want.param_grads, "parameter gradients"));
        if (HasFailure()) return;
      }
}

// dL/dinput asked for (an encoding before the network): the one kernel forms it as backward()
// does, the same bits, into a dense matrix or a strided one (staged through a dense copy).
TEST_F(FusedTrainStep, InputGradientsSameBitsAsTwoCalls) {
  const StepCase cases[] = {{DType::F16, 32, 64, 2, 3},
                            {DType::BF16, 64, 64, 1, 16},
                            {DType::F16, 32, 64, 2, 64},
                            {DType::F16, 32, 64, 2, 3, "ReLU", "Sigmoid"}};  // W3's colour network
  uint64_t seed = 5100;
  for (const StepCase& c : cases)
    for (int64_t batch : batches())
      for (bool strided : {false, true}) {
        const char* name = strided ? "L1" : "RelativeL2";
        SCOPED_TRACE(describe(c, name, batch) + (strided ? ", strided dL/dinput" : ", dense dL/dinput"));
        Fixture f(c, batch, seed++);
        auto loss = create_loss({{"otype", name}}, BuildOptions{Device::CUDA});
        std::vector<double> want_din, got_din;
        const PassResult want = run(*f.two_calls, *loss, f.in.view, f.tgt.view, nullptr, f.gview,
                                    GradientMode::Overwrite, kNaN, &want_din, strided);
        const PassResult got = run(*f.net, *loss, f.in.view, f.tgt.view, nullptr, f.gview, GradientMode::Overwrite,
                                   kNaN, &got_din, strided);
        EXPECT_FALSE(want.one_kernel) << "switched off, the one kernel ran";
        EXPECT_EQ(got.one_kernel, kernel_applies(c, name)) << "which path ran";
        EXPECT_TRUE(same_bits(got.values, want.values, "per-row loss values"));
        EXPECT_TRUE(same_bits(got.param_grads, want.param_grads, "parameter gradients"));
        EXPECT_TRUE(same_bits(got_din, want_din, "dL/dinput"));
        if (HasFailure()) return;
      }
}

// Accumulate adds the pass's gradients to what is there, as backward() does.
TEST_F(FusedTrainStep, AccumulatesLikeBackward) {
  const StepCase c{DType::F16, 64, 64, 2, 64};
  Fixture f(c, 20000, 61);
  auto loss = create_loss({{"otype", "L2"}}, BuildOptions{Device::CUDA});
  const PassResult want = run(*f.two_calls, *loss, f.in.view, f.tgt.view, nullptr, f.gview, GradientMode::Accumulate, 0.25);
  const PassResult got = run(*f.net, *loss, f.in.view, f.tgt.view, nullptr, f.gview, GradientMode::Accumulate, 0.25);
  EXPECT_EQ(got.one_kernel, kernel_applies(c, "L2"));
  EXPECT_TRUE(same_bits(got.param_grads, want.param_grads, "accumulated parameter gradients"));
  // And not simply overwritten: the pass's own gradients differ from these by the 0.25 added.
  const PassResult plain = run(*f.net, *loss, f.in.view, f.tgt.view, nullptr, f.gview, GradientMode::Overwrite, kNaN);
  size_t moved = 0;
  for (size_t i = 0; i < plain.param_grads.size(); ++i) moved += plain.param_grads[i] != got.param_grads[i];
  EXPECT_GT(moved, plain.param_grads.size() / 2) << "Accumulate wrote the same as Overwrite";
}

// Where the kernel does not apply the default path runs: other losses, a data pdf, three hidden
// layers, other widths and hidden activations, an output activation on more than 32 columns; a
// strided target goes through the kernel's scalar loads (and a 24-wide Sigmoid output through it).
TEST_F(FusedTrainStep, OtherCasesTakeTheDefaultPath) {
  struct Variant {
    StepCase c;
    std::string loss;
    bool pdf, strided;
  };
  const Variant variants[] = {
      {{DType::F16, 64, 64, 2, 64}, "MAPE", false, false},         {{DType::F16, 64, 64, 2, 64}, "RelativeL1", false, false},
      {{DType::F16, 64, 64, 2, 64}, "L2", true, false},          {{DType::F16, 64, 64, 3, 64}, "L2", false, false},
      {{DType::F16, 64, 128, 2, 64}, "L2", false, false},        {{DType::F16, 64, 32, 2, 16}, "L2", false, false},
      {{DType::F16, 64, 64, 2, 64, "Tanh", "None"}, "L2", false, false},
      {{DType::F16, 64, 64, 2, 24, "ReLU", "Sigmoid"}, "L2", false, false},
      {{DType::F16, 64, 64, 2, 40, "ReLU", "Sigmoid"}, "L2", false, false},  // 48 columns: no room for z
      {{DType::F16, 16, 64, 2, 16}, "L2", false, false},         {{DType::F16, 64, 64, 2, 24}, "L2", false, true},
  };
  uint64_t seed = 900;
  for (const Variant& v : variants) {
    const int64_t batch = 3001;
    SCOPED_TRACE(describe(v.c, v.loss, batch) + (v.pdf ? " with a data pdf" : "") + (v.strided ? " strided target" : ""));
    Fixture f(v.c, batch, seed++, v.strided);
    DeviceMatrix pdf(DType::F32, batch, v.c.dims, false);
    std::vector<double> pdf_values(batch * v.c.dims);
    Pcg32 rng(seed);
    for (auto& x : pdf_values) x = 0.5 + rng.next_double();
    upload(pdf.view, pdf_values);
    const TensorView* pdf_view = v.pdf ? &pdf.view : nullptr;
    auto loss = create_loss({{"otype", v.loss}}, BuildOptions{Device::CUDA});
    const PassResult want = run(*f.two_calls, *loss, f.in.view, f.tgt.view, pdf_view, f.gview, GradientMode::Overwrite, kNaN);
    const PassResult got = run(*f.net, *loss, f.in.view, f.tgt.view, pdf_view, f.gview, GradientMode::Overwrite, kNaN);
    EXPECT_EQ(got.one_kernel, !v.pdf && kernel_applies(v.c, v.loss)) << "which path ran";
    EXPECT_TRUE(same_bits(got.values, want.values, "per-row loss values"));
    EXPECT_TRUE(same_bits(got.param_grads, want.param_grads, "parameter gradients"));
    if (HasFailure()) return;
  }
}

// Ten Trainer steps (Adam) with the one kernel and without: the same losses and parameters bit for
// bit, and the one kernel taken on sm_90+ through NetworkWithInputEncoding too: behind a
// parameter-free encoding, and behind a (deterministic) hash grid trained from the kernel's
// dL/dinput, with W1's RelativeL2.
TEST_F(FusedTrainStep, TrainerStepsSameBits) {
  for (bool with_encoding : {false, true}) {
    SCOPED_TRACE(with_encoding ? "NetworkWithInputEncoding (Identity)" : "FullyFusedMLP");
    const tinyfuse::testing::TrainerRun want = tinyfuse::testing::ten_trainer_steps(with_encoding, one_kernel_step(false));
    EXPECT_EQ(want.kernel_of(fz::FusedPass::TrainStep), fz::FusedKernel::None) << "switched off, the path ran";
    const tinyfuse::testing::TrainerRun got = tinyfuse::testing::ten_trainer_steps(with_encoding, one_kernel_step(true));
    EXPECT_EQ(got.kernel_of(fz::FusedPass::TrainStep),
              sm90_or_newer() ? fz::FusedKernel::PipelinedTrainStep : fz::FusedKernel::None)
        << "which path ran";
    tinyfuse::testing::expect_same_runs(got, want, "one kernel");
  }
  SCOPED_TRACE("NetworkWithInputEncoding (deterministic HashGrid), RelativeL2");
  const json grid = tinyfuse::testing::deterministic_grid();
  const tinyfuse::testing::TrainerRun want =
      tinyfuse::testing::ten_trainer_steps(&grid, 2, one_kernel_step(false), "RelativeL2");
  const tinyfuse::testing::TrainerRun got = tinyfuse::testing::ten_trainer_steps(&grid, 2, one_kernel_step(true), "RelativeL2");
  EXPECT_EQ(got.kernel_of(fz::FusedPass::TrainStep),
            sm90_or_newer() ? fz::FusedKernel::PipelinedTrainStep : fz::FusedKernel::None)
      << "which path ran";
  tinyfuse::testing::expect_same_runs(got, want, "one kernel");
  EXPECT_LT(got.losses.back(), got.losses.front()) << "the grid model did not learn";
}

}  // namespace
