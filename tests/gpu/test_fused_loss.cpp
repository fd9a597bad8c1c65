// FullyFusedMLP's forward_with_loss: the loss evaluated inside the pipelined training forward
// (src/cuda/fused/pipelined/loss_epilogue.cuh) against the default path, forward() into an output and then
// Loss::evaluate (the GPU loss's dense per-row kernel). The two must write the same bits: per-row
// loss values and loss gradients (values and gradients are poisoned with NaN first, so an element
// the kernel skipped cannot pass), and the backward from either context the same parameter
// gradients. On sm_90+ the kernel path must have run for L2, RelativeL2 and L1 (the losses it folds;
// launch counter); elsewhere (the other losses, a data pdf, fused_loss() off) the default path runs and
// gives the same bits. Targets both 16-byte aligned (vector loads) and not (a strided view, the Trainer test's
// 7 columns: scalar loads). Then whole Trainer steps with and without the folded loss: the same loss
// and parameters bit for bit. Shapes: widths 16 to 128, outputs padded (3 -> 16, 17 -> 32,
// 40 -> 48: six 8-column groups per row, which the lanes' walk does not divide evenly), kept z
// (Tanh hidden, Sigmoid output), batches from 1 to many tiles per warp.
// Runs on the device machine; skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/loss_config.h"
#include "cuda/fused/fully_fused_mlp.h"
#include "gpu/fused_pass_cases.h"
#include "testing/device_matrix.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
using tinyfuse::testing::download;
using tinyfuse::testing::upload;
using tinyfuse::testing::DeviceMatrix;
namespace fz = tinyfuse::cuda::fused;
using tinyfuse::testing::describe;
using tinyfuse::testing::network_config;
using tinyfuse::testing::sm90_or_newer;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using LossCase = tinyfuse::testing::FusedPassCase;

// The folded path against forward() then the loss.
::testing::AssertionResult same_bits(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  return tinyfuse::testing::same_bits(got, want, what, "folded", "forward, then the loss");
}

std::vector<int64_t> batches() {
  if (const char* q = std::getenv("TINYFUSE_QUICK"); q && *q == '1') return {1, 17, 257};
  return {1, 17, 255, 257, 1000, 70001};
}

class FusedLoss : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// A network that may fold the loss into its training forward, or not; neither runs the whole
// pass in one kernel (forward_with_loss is what is tested here).
BuildOptions folding(bool fold) {
  BuildOptions o{Device::CUDA};
  o.fused_kernels.one_kernel_step = false;
  o.fused_kernels.folded_loss = fold;
  return o;
}

struct StepResult {
  std::vector<double> values, loss_grads, param_grads;
  bool folded = false;  // the kernel that evaluates the loss ran
};

// forward_with_loss, then backward with parameter gradients.
StepResult run(Network& net, const Loss& loss, const TensorView& in, const TensorView& target, const TensorView* pdf,
               const TensorView& param_grads) {
  const int64_t batch = in.rows();
  const DType p = net.output_dtype();
  const uint32_t W = net.padded_output_width();
  DeviceMatrix out(p, batch, W, false), grads(p, batch, W, false), values(DType::F32, batch, 1, false);
  out.poison();
  grads.poison();
  values.poison();
  fill_tensor(param_grads, kNaN);
  StepResult r;
  auto ctx = net.forward_with_loss(in, out.view, loss, 128.0f, target, values.view, grads.view, pdf);
  r.folded = cuda::fused_kernel_used(net, fz::FusedPass::ForwardWithLoss) == fz::FusedKernel::PipelinedFoldedLoss;
  net.backward(*ctx, in, out.view, grads.view, nullptr, false, GradientMode::Overwrite);
  r.values = download(values.view);
  r.loss_grads = download(grads.view);
  r.param_grads = download(param_grads);
  return r;
}

// The two networks of one case on the same parameters.
struct NetworkPair {
  std::unique_ptr<Network> plain, folds;
  NetworkPair(const LossCase& c, const TensorView& params, const TensorView& grads)
      : plain(create_network(network_config(c), c.in, c.dims, folding(false))),
        folds(create_network(network_config(c), c.in, c.dims, folding(true))) {
    plain->set_params(params, params, grads);
    folds->set_params(params, params, grads);
  }
};

// Losses whose terms are finite for any prediction with this output activation (CrossEntropy and
// Variance need predictions in (0, 1)), plus RelativeL2Luminance, which the kernel leaves to the
// default path.
std::vector<std::string> losses_for(const LossCase& c) {
  std::vector<std::string> l = {"L2", "L1", "RelativeL2", "RelativeL1", "MAPE", "SMAPE"};
  if (c.out_act == "Sigmoid") l.insert(l.end(), {"CrossEntropy", "Variance"});
  if (c.dims >= 3) l.push_back("RelativeL2Luminance");
  return l;
}

TEST_F(FusedLoss, SameBitsAsForwardThenLoss) {
  const bool expect_kernel = sm90_or_newer();
  const LossCase cases[] = {
      {DType::F16, 64, 64, 2, 64, "ReLU", "None"},     {DType::BF16, 64, 64, 2, 64, "ReLU", "None"},
      {DType::F16, 32, 16, 1, 3, "ReLU", "None"},      {DType::BF16, 16, 32, 3, 17, "Tanh", "Sigmoid"},
      {DType::F16, 32, 64, 1, 40, "LeakyReLU", "None"}, {DType::F16, 64, 128, 2, 64, "ReLU", "None"},
      {DType::BF16, 16, 64, 2, 5, "Sine", "Sigmoid"},
  };
  uint64_t seed = 9100;
  for (const LossCase& c : cases)
    for (int64_t batch : batches()) {
      auto net = create_network(network_config(c), c.in, c.dims, folding(true));
      const DType p = c.precision;
      const size_t n = net->n_params();
      Pcg32 rng(seed++);
      std::vector<float> init(n);
      net->initialize_params(rng, init.data());
      Buffer pbuf(Device::CUDA, n * dtype_size(p)), gbuf(Device::CUDA, n * dtype_size(p));
      const TensorView pview = pbuf.vector(p, n), gview = gbuf.vector(p, n);
      upload(pview, std::vector<double>(init.begin(), init.end()));
      const NetworkPair nets(c, pview, gview);
      std::vector<double> input(batch * c.in), target(batch * c.dims);
      for (auto& x : input) x = 2 * rng.next_double() - 1;
      for (auto& x : target) x = c.out_act == "Sigmoid" ? rng.next_double() : 2 * rng.next_double() - 1;
      DeviceMatrix in(p, batch, c.in, false), tgt(DType::F32, batch, c.dims, false);
      upload(in.view, input);
      upload(tgt.view, target);
      for (const std::string& name : losses_for(c)) {
        SCOPED_TRACE(describe(c, name, batch));
        auto loss = create_loss({{"otype", name}}, BuildOptions{Device::CUDA});
        const StepResult want = run(*nets.plain, *loss, in.view, tgt.view, nullptr, gview);
        EXPECT_FALSE(want.folded) << "the default path launched the folded kernel";
        const StepResult got = run(*nets.folds, *loss, in.view, tgt.view, nullptr, gview);
        // L2, RelativeL2 and L1 are folded, up to 64 wide (loss_epilogue.cuh, pipelined/training_forward.cu).
        const bool kernel_can = expect_kernel && (name == "L2" || name == "RelativeL2" || name == "L1") && c.width <= 64;
        EXPECT_EQ(got.folded, kernel_can) << "which forward ran";
        EXPECT_TRUE(same_bits(got.values, want.values, "per-row loss values"));
        EXPECT_TRUE(same_bits(got.loss_grads, want.loss_grads, "loss gradients"));
        EXPECT_TRUE(same_bits(got.param_grads, want.param_grads, "parameter gradients"));
        if (HasFailure()) return;
      }
    }
}

// The fold's rule, asked of the network (the planner, plan.cpp): L2, RelativeL2 and L1, up to 64 wide, sm_90+,
// folded_loss on; otherwise forward_with_loss takes the default path and still gives a context.
TEST_F(FusedLoss, TheFoldRule) {
  const int64_t batch = 64;
  auto folds = [&](uint32_t width, const char* loss_name, bool fold_allowed) {
    const LossCase c{DType::F16, 32, width, 2, 3, "ReLU", "None"};
    auto net = create_network(network_config(c), c.in, c.dims, folding(fold_allowed));
    const size_t n = net->n_params();
    Buffer pbuf(Device::CUDA, n * 2), gbuf(Device::CUDA, n * 2);
    const TensorView pview = pbuf.vector(c.precision, n), gview = gbuf.vector(c.precision, n);
    fill_tensor(pview, 0.01);
    net->set_params(pview, pview, gview);
    DeviceMatrix in(c.precision, batch, c.in, false), target(DType::F32, batch, c.dims, false);
    fill_tensor(in.view, 0.5);
    fill_tensor(target.view, 0.25);
    auto loss = create_loss({{"otype", loss_name}}, BuildOptions{Device::CUDA});
    const StepResult r = run(*net, *loss, in.view, target.view, nullptr, gview);
    EXPECT_EQ(r.values.size(), static_cast<size_t>(batch)) << "a context and values either way";
    return r.folded;
  };
  EXPECT_EQ(folds(64, "L2", true), sm90_or_newer()) << "L2, 64 wide";
  EXPECT_EQ(folds(64, "RelativeL2", true), sm90_or_newer()) << "RelativeL2, 64 wide";
  EXPECT_EQ(folds(64, "L1", true), sm90_or_newer()) << "L1, 64 wide";
  for (const char* other : {"RelativeL1", "RelativeL2Luminance", "MAPE"}) EXPECT_FALSE(folds(64, other, true)) << other;
  EXPECT_FALSE(folds(128, "L2", true)) << "128 wide keeps the loss kernel";
  EXPECT_FALSE(folds(64, "L2", false)) << "switched off";
}

// A strided target (rows further apart than their width, only 4-byte aligned) goes through the
// kernel's scalar loads; a data pdf goes the default way. Both give the default path's bits.
TEST_F(FusedLoss, StridedTargetAndDataPdf) {
  const bool expect_kernel = sm90_or_newer();
  const LossCase c{DType::F16, 64, 64, 2, 24, "ReLU", "None"};
  auto net = create_network(network_config(c), c.in, c.dims, folding(true));
  const int64_t batch = 300;
  const size_t n = net->n_params();
  Pcg32 rng(77);
  std::vector<float> init(n);
  net->initialize_params(rng, init.data());
  Buffer pbuf(Device::CUDA, n * 2), gbuf(Device::CUDA, n * 2);
  const TensorView pview = pbuf.vector(c.precision, n), gview = gbuf.vector(c.precision, n);
  upload(pview, std::vector<double>(init.begin(), init.end()));
  const NetworkPair nets(c, pview, gview);
  std::vector<double> input(batch * c.in), target(batch * c.dims), pdf(batch * c.dims);
  for (auto& x : input) x = 2 * rng.next_double() - 1;
  for (auto& x : target) x = 2 * rng.next_double() - 1;
  for (auto& x : pdf) x = 0.5 + rng.next_double();
  DeviceMatrix in(c.precision, batch, c.in, false), strided_target(DType::F32, batch, c.dims, true),
      dense_target(DType::F32, batch, c.dims, false), pdf_m(DType::F32, batch, c.dims, false);
  upload(in.view, input);
  upload(strided_target.view, target);
  upload(dense_target.view, target);
  upload(pdf_m.view, pdf);
  auto loss = create_loss({{"otype", "L2"}}, BuildOptions{Device::CUDA});
  struct Variant {
    const char* what;
    const TensorView* target;
    const TensorView* pdf;
    bool kernel;
  };
  for (const Variant& v : {Variant{"strided target", &strided_target.view, nullptr, expect_kernel},
                           Variant{"data pdf", &dense_target.view, &pdf_m.view, false}}) {
    SCOPED_TRACE(v.what);
    const StepResult want = run(*nets.plain, *loss, in.view, *v.target, v.pdf, gview);
    const StepResult got = run(*nets.folds, *loss, in.view, *v.target, v.pdf, gview);
    EXPECT_EQ(got.folded, v.kernel) << "which forward ran";
    EXPECT_TRUE(same_bits(got.values, want.values, "per-row loss values"));
    EXPECT_TRUE(same_bits(got.loss_grads, want.loss_grads, "loss gradients"));
    EXPECT_TRUE(same_bits(got.param_grads, want.param_grads, "parameter gradients"));
  }
}

// Ten Trainer steps (Adam), folded and not: the same losses and parameters bit for bit, and the
// fold taken on sm_90+ through NetworkWithInputEncoding too.
TEST_F(FusedLoss, TrainerStepsSameBits) {
  for (bool with_encoding : {false, true}) {
    SCOPED_TRACE(with_encoding ? "NetworkWithInputEncoding (Identity)" : "FullyFusedMLP");
    const tinyfuse::testing::TrainerRun want = tinyfuse::testing::ten_trainer_steps(with_encoding, folding(false));
    EXPECT_EQ(want.kernel_of(fz::FusedPass::ForwardWithLoss), fz::FusedKernel::None) << "switched off, the path ran";
    const tinyfuse::testing::TrainerRun got = tinyfuse::testing::ten_trainer_steps(with_encoding, folding(true));
    EXPECT_EQ(got.kernel_of(fz::FusedPass::ForwardWithLoss),
              sm90_or_newer() ? fz::FusedKernel::PipelinedFoldedLoss : fz::FusedKernel::None)
        << "which path ran";
    tinyfuse::testing::expect_same_runs(got, want, "folded");
  }
}

}  // namespace
