// FullyFusedMLP's forward_with_loss: the loss evaluated inside the streaming training forward
// (src/cuda/fused/loss_epilogue.cuh) against the default path, forward() into an output and then
// Loss::evaluate (the GPU loss's dense per-row kernel). The two must write the same bits: per-row
// loss values and loss gradients (values and gradients are poisoned with NaN first, so an element
// the kernel skipped cannot pass), and the backward from either context the same parameter
// gradients. On sm_90+ the kernel path must have run for L2 (the one loss it folds; launch
// counter); elsewhere (the other losses, a data pdf, fused_loss() off) the default path runs and
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
#include "cuda/fused/forward_choice.h"
#include "cuda/fused/launch.h"
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
    if (fz::general_forward_forced()) GTEST_SKIP() << "TINYFUSE_FUSED_FORWARD=general leaves the folded loss out";
    was_on_ = fz::fused_loss();
    step_was_on_ = fz::fused_train_step();
    fz::force_fused_train_step(false);  // the Trainer's pass as two calls: forward_with_loss is what is tested here
  }
  void TearDown() override {
    fz::force_fused_loss(was_on_);
    fz::force_fused_train_step(step_was_on_);
  }
  bool was_on_ = true, step_was_on_ = true;
};

struct StepResult {
  std::vector<double> values, loss_grads, param_grads;
  unsigned long long folded = 0;  // kernel launches that evaluated the loss
};

// forward_with_loss (folded or not, as `fold` says), then backward with parameter gradients.
StepResult run(bool fold, Network& net, const Loss& loss, const TensorView& in, const TensorView& target,
               const TensorView* pdf, const TensorView& param_grads) {
  const int64_t batch = in.rows();
  const DType p = net.output_dtype();
  const uint32_t W = net.padded_output_width();
  DeviceMatrix out(p, batch, W, false), grads(p, batch, W, false), values(DType::F32, batch, 1, false);
  out.poison();
  grads.poison();
  values.poison();
  fill_tensor(param_grads, kNaN);
  fz::force_fused_loss(fold);
  StepResult r;
  const unsigned long long before = fz::fused_loss_launches();
  auto ctx = net.forward_with_loss(in, out.view, loss, 128.0f, target, values.view, grads.view, pdf);
  r.folded = fz::fused_loss_launches() - before;
  net.backward(*ctx, in, out.view, grads.view, nullptr, false, GradientMode::Overwrite);
  r.values = download(values.view);
  r.loss_grads = download(grads.view);
  r.param_grads = download(param_grads);
  return r;
}

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
      auto net = create_network(network_config(c), c.in, c.dims, BuildOptions{Device::CUDA});
      const DType p = c.precision;
      const size_t n = net->n_params();
      Pcg32 rng(seed++);
      std::vector<float> init(n);
      net->initialize_params(rng, init.data());
      Buffer pbuf(Device::CUDA, n * dtype_size(p)), gbuf(Device::CUDA, n * dtype_size(p));
      const TensorView pview = pbuf.vector(p, n), gview = gbuf.vector(p, n);
      upload(pview, std::vector<double>(init.begin(), init.end()));
      net->set_params(pview, pview, gview);
      std::vector<double> input(batch * c.in), target(batch * c.dims);
      for (auto& x : input) x = 2 * rng.next_double() - 1;
      for (auto& x : target) x = c.out_act == "Sigmoid" ? rng.next_double() : 2 * rng.next_double() - 1;
      DeviceMatrix in(p, batch, c.in, false), tgt(DType::F32, batch, c.dims, false);
      upload(in.view, input);
      upload(tgt.view, target);
      for (const std::string& name : losses_for(c)) {
        SCOPED_TRACE(describe(c, name, batch));
        auto loss = create_loss({{"otype", name}}, BuildOptions{Device::CUDA});
        const StepResult want = run(false, *net, *loss, in.view, tgt.view, nullptr, gview);
        EXPECT_EQ(want.folded, 0u) << "the default path launched the folded kernel";
        const StepResult got = run(true, *net, *loss, in.view, tgt.view, nullptr, gview);
        // L2 is the one loss folded, up to 64 wide (loss_epilogue.cuh, stream_forward.cu).
        const bool kernel_can = expect_kernel && name == "L2" && c.width <= 64;
        EXPECT_EQ(got.folded, kernel_can ? 1u : 0u) << "which forward ran";
        EXPECT_TRUE(same_bits(got.values, want.values, "per-row loss values"));
        EXPECT_TRUE(same_bits(got.loss_grads, want.loss_grads, "loss gradients"));
        EXPECT_TRUE(same_bits(got.param_grads, want.param_grads, "parameter gradients"));
        if (HasFailure()) return;
      }
    }
}

// forward_folding_loss asks forward_may_fold_loss before it allocates the context: the answer
// must follow the rule the kernel applies at launch (L2 only, up to 64 wide, sm_90+, switch on).
TEST_F(FusedLoss, TheFoldRuleIsAskedBeforeAllocating) {
  DeviceMatrix target(DType::F32, 64, 3, false), values(DType::F32, 64, 1, false), grads(DType::F16, 64, 16, false);
  fz::FusedShape shape;
  shape.width = 64;
  shape.in_width = 32;
  shape.out_width = 16;
  shape.n_hidden = 2;
  fz::ForwardArgs::Loss L;
  L.kind = static_cast<int>(LossKind::L2);
  L.dims = 3;
  L.target = static_cast<const float*>(target.view.data);
  L.ld_target = 3;
  L.values = static_cast<float*>(values.view.data);
  L.gradients = grads.view.data;
  L.ld_grad = 16;
  fz::force_fused_loss(true);
  EXPECT_EQ(fz::forward_may_fold_loss(shape, L), sm90_or_newer()) << "L2, 64 wide";
  for (LossKind k : {LossKind::L1, LossKind::RelativeL2, LossKind::MAPE}) {
    fz::ForwardArgs::Loss other = L;
    other.kind = static_cast<int>(k);
    EXPECT_FALSE(fz::forward_may_fold_loss(shape, other)) << loss_names()[static_cast<size_t>(k)];
  }
  fz::FusedShape wide = shape;
  wide.width = 128;
  EXPECT_FALSE(fz::forward_may_fold_loss(wide, L)) << "128 wide keeps the loss kernel";
  fz::ForwardArgs::Loss no_gradients = L;
  no_gradients.gradients = nullptr;
  EXPECT_FALSE(fz::forward_may_fold_loss(shape, no_gradients)) << "nothing to fold into";
  fz::force_fused_loss(false);
  EXPECT_FALSE(fz::forward_may_fold_loss(shape, L)) << "switched off";
}

// A strided target (rows further apart than their width, only 4-byte aligned) goes through the
// kernel's scalar loads; a data pdf goes the default way. Both give the default path's bits.
TEST_F(FusedLoss, StridedTargetAndDataPdf) {
  const bool expect_kernel = sm90_or_newer();
  const LossCase c{DType::F16, 64, 64, 2, 24, "ReLU", "None"};
  auto net = create_network(network_config(c), c.in, c.dims, BuildOptions{Device::CUDA});
  const int64_t batch = 300;
  const size_t n = net->n_params();
  Pcg32 rng(77);
  std::vector<float> init(n);
  net->initialize_params(rng, init.data());
  Buffer pbuf(Device::CUDA, n * 2), gbuf(Device::CUDA, n * 2);
  const TensorView pview = pbuf.vector(c.precision, n), gview = gbuf.vector(c.precision, n);
  upload(pview, std::vector<double>(init.begin(), init.end()));
  net->set_params(pview, pview, gview);
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
    const StepResult want = run(false, *net, *loss, in.view, *v.target, v.pdf, gview);
    const StepResult got = run(true, *net, *loss, in.view, *v.target, v.pdf, gview);
    EXPECT_EQ(got.folded, v.kernel ? 1u : 0u) << "which forward ran";
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
    fz::force_fused_loss(false);
    const unsigned long long off = fz::fused_loss_launches();
    const tinyfuse::testing::TrainerRun want = tinyfuse::testing::ten_trainer_steps(with_encoding);
    EXPECT_EQ(fz::fused_loss_launches() - off, 0u) << "switched off, the path ran";
    fz::force_fused_loss(true);
    const unsigned long long before = fz::fused_loss_launches();
    const tinyfuse::testing::TrainerRun got = tinyfuse::testing::ten_trainer_steps(with_encoding);
    EXPECT_EQ(fz::fused_loss_launches() - before, sm90_or_newer() ? 10u : 0u) << "which path ran";
    tinyfuse::testing::expect_same_runs(got, want, "folded");
  }
}

}  // namespace
