// FullyFusedMLP's pipelined kernels (src/cuda/fused/pipelined/) against the general ones, each
// on a network built to use only them (BuildOptions::fused_kernels): the two must write the same
// bits, so every output of forward(), inference() and backward() (input and parameter gradients,
// which read the context's y, z and output z) must be bitwise identical whichever kernel ran, and
// each network must have run the kernels it was built for. Widths 16/32/64/128; hidden activations whose derivative comes from y (ReLU,
// LeakyReLU) or from a kept z (Tanh, Sine); outputs with (Sigmoid) and without (None) a kept z;
// batches from 1 to several tiles per warp of the persistent grid; strided views (staged by the
// network). Outputs are poisoned with NaN first and must come back finite. The backward halves
// compare the pipelined backward (pipelined/backward_kernel.cuh) against fused_backward_kernel:
// with and without dL/dinput, with and without parameter gradients (no dZ written), out_z read
// where the output activation keeps it.
// Runs on the device machine; skips without a GPU. On devices below sm_80 both runs take the
// general kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/fused/fully_fused_mlp.h"
#include "testing/device_matrix.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
using tinyfuse::testing::download;
using tinyfuse::testing::upload;
namespace fz = tinyfuse::cuda::fused;

namespace {

int compute_capability() {
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? prop.major * 10 + prop.minor : 0;
}

// The general kernels only (the reference), and the mma.sync pipelined kernels with the weight
// gradients left to weight_grad/ (the Hopper wgmma inference kernel matches to rounding only:
// test_fused_wgmma.cpp; the weight gradients formed inside sum in another order:
// FusedWeightGrads below).
BuildOptions general_kernels() {
  BuildOptions o{Device::CUDA};
  o.fused_kernels.pipelined = false;
  return o;
}
BuildOptions pipelined_kernels() {
  BuildOptions o{Device::CUDA};
  o.fused_kernels.hopper = false;
  o.fused_kernels.fused_weight_grads = false;
  return o;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();


// Same bits (FP16 / BF16 -> double is exact, so -0 and +0 stay apart) and no NaN: a poisoned
// element neither kernel wrote cannot pass.
::testing::AssertionResult same_bits(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::isnan(got[i]) || std::isnan(want[i]) || std::memcmp(&got[i], &want[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " (pipelined) vs " << want[i]
                                           << " (general)";
  return ::testing::AssertionSuccess();
}

using tinyfuse::testing::DeviceMatrix;

struct Results {
  std::vector<double> out, out_no_keep, inference, dx, grads, grads_from_ctx_without_output, dx_without_grads;
};

struct PipelinedCase {
  DType precision;
  uint32_t in, width, hidden, out;
  std::string act, out_act;
  int64_t batch;
  bool strided;
};

std::string describe(const PipelinedCase& s) {
  return std::string(s.precision == DType::BF16 ? "bf16 " : "f16 ") + std::to_string(s.in) + "->" +
         std::to_string(s.width) + "x" + std::to_string(s.hidden) + "->" + std::to_string(s.out) + " " + s.act + "/" +
         s.out_act + " batch " + std::to_string(s.batch) + (s.strided ? " strided" : "");
}

// forward (with and without an output), inference, and backward from both contexts, all on one
// network and data.
Results run(const PipelinedCase& s, Network& net, const TensorView& params, const TensorView& grads,
            const std::vector<double>& input, const std::vector<double>& dout) {
  const DType p = s.precision;
  const uint32_t W = net.padded_output_width();
  DeviceMatrix in(p, s.batch, s.in, s.strided), out(p, s.batch, W, s.strided), dy(p, s.batch, W, s.strided),
      dx(p, s.batch, s.in, s.strided);
  upload(in.view, input);
  upload(dy.view, dout);
  net.set_params(params, params, grads);
  Results r;
  out.poison();
  auto ctx = net.forward(in.view, &out.view);
  r.out = download(out.view);
  auto ctx_no_out = net.forward(in.view, nullptr);
  out.poison();
  net.inference(in.view, out.view);
  r.inference = download(out.view);
  dx.poison();
  fill_tensor(grads, kNaN);
  net.backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Overwrite);
  r.dx = download(dx.view);
  r.grads = download(grads);
  fill_tensor(grads, kNaN);
  net.backward(*ctx_no_out, in.view, out.view, dy.view, nullptr, false, GradientMode::Overwrite);
  r.grads_from_ctx_without_output = download(grads);
  dx.poison();
  net.backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Ignore);
  r.dx_without_grads = download(dx.view);
  return r;
}

// From which compute capability each pass runs the pipelined kernel (below it, the general one).
struct PipelinedFrom {
  int inference = 80, training_forward = 90, backward = 80;
};
constexpr int kNever = 1000;

void check(const PipelinedCase& s, uint64_t seed, PipelinedFrom from = {}) {
  SCOPED_TRACE(describe(s));
  const DType p = s.precision;
  json cfg = {{"otype", "FullyFusedMLP"}, {"n_neurons", s.width},          {"n_hidden_layers", s.hidden},
              {"activation", s.act},      {"output_activation", s.out_act}, {"precision", p == DType::BF16 ? "bf16" : "f16"}};
  auto ref = create_network(cfg, s.in, s.out, general_kernels());
  auto net = create_network(cfg, s.in, s.out, pipelined_kernels());
  const size_t n = net->n_params();
  const uint32_t W = net->padded_output_width();
  Pcg32 rng(seed);
  std::vector<float> init(n);
  net->initialize_params(rng, init.data());
  std::vector<double> host_params(init.begin(), init.end()), input(s.batch * s.in), dout(s.batch * W);
  for (auto& x : input) x = 2 * rng.next_double() - 1;
  for (auto& x : dout) x = 2 * rng.next_double() - 1;
  Buffer pbuf(Device::CUDA, n * dtype_size(p)), gbuf(Device::CUDA, n * dtype_size(p));
  const TensorView pview = pbuf.vector(p, n), gview = gbuf.vector(p, n);
  upload(pview, host_params);

  const Results want = run(s, *ref, pview, gview, input, dout);
  const Results got = run(s, *net, pview, gview, input, dout);
  for (fz::FusedPass pass : {fz::FusedPass::Inference, fz::FusedPass::TrainingForward, fz::FusedPass::Backward})
    EXPECT_EQ(cuda::fused_kernel_used(*ref, pass), fz::FusedKernel::General) << fz::to_string(pass);
  const int cc = compute_capability();
  const auto pipelined_from = [](int min_cc, int cc) { return cc >= min_cc ? fz::FusedKernel::Pipelined : fz::FusedKernel::General; };
  EXPECT_EQ(cuda::fused_kernel_used(*net, fz::FusedPass::Inference), pipelined_from(from.inference, cc));
  EXPECT_EQ(cuda::fused_kernel_used(*net, fz::FusedPass::TrainingForward), pipelined_from(from.training_forward, cc));
  EXPECT_EQ(cuda::fused_kernel_used(*net, fz::FusedPass::Backward), pipelined_from(from.backward, cc));

  EXPECT_TRUE(same_bits(got.out, want.out)) << "forward output";
  EXPECT_TRUE(same_bits(got.inference, want.inference)) << "inference output";
  EXPECT_TRUE(same_bits(got.inference, want.out)) << "inference vs forward";
  EXPECT_TRUE(same_bits(got.dx, want.dx)) << "input gradient";
  EXPECT_TRUE(same_bits(got.grads, want.grads)) << "parameter gradient";
  EXPECT_TRUE(same_bits(got.grads_from_ctx_without_output, want.grads)) << "parameter gradient, forward without output";
  EXPECT_TRUE(same_bits(got.dx_without_grads, want.dx)) << "input gradient without parameter gradients";
}

class FusedPipelined : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// Per width an input / output / depth that exercises the stage: wider or narrower than the hidden
// layers, outputs padded (5 -> 16), out_z beside a 32-wide output.
const PipelinedCase kShapes[] = {
    {DType::F16, 64, 16, 1, 32, "", "", 0, false},
    {DType::F16, 16, 32, 2, 16, "", "", 0, false},
    {DType::F16, 32, 64, 3, 5, "", "", 0, false},
    {DType::F16, 64, 128, 2, 32, "", "", 0, false},
};

TEST_F(FusedPipelined, KeepsWhatTheGeneralKernelKeepsBitwise) {
  uint64_t seed = 1;
  for (DType p : {DType::F16, DType::BF16})
    for (PipelinedCase s : kShapes)
      for (const char* act : {"ReLU", "LeakyReLU", "Tanh", "Sine"})
        for (const char* out_act : {"None", "Sigmoid"})
          for (int64_t batch : {1, 17, 1000, 70000}) {
            s.precision = p;
            s.act = act;
            s.out_act = out_act;
            s.batch = batch;
            s.strided = false;
            check(s, seed++);
            if (HasFatalFailure()) return;
          }
}

// Strided (staged) views, batches with many tiles per warp at the narrow widths (64-row tiles),
// and identity hidden layers.
TEST_F(FusedPipelined, StridedViewsAndLargeBatches) {
  uint64_t seed = 1000;
  for (PipelinedCase s : kShapes) {
    s.act = "Tanh";
    s.out_act = "Sigmoid";
    s.batch = 1000;
    s.strided = true;
    check(s, seed++);
    s.act = "ReLU";
    s.out_act = "None";
    s.batch = 300001;
    s.strided = false;
    check(s, seed++);
    s.act = "None";  // no saved derivative read by the backward
    s.out_act = "Sigmoid";
    s.batch = 1000;
    check(s, seed++);
  }
}

// W2's network (OneBlob's 128 features into 128 x 5, 3 outputs): 174 KiB of resident weights
// leave room for one 32 x 128 stage per warp (208 KiB), not two (242 KiB > 227 KiB), so the
// training forward runs the one-stage variant and the backward the one-buffer variant (a 32 x 128
// buffer and item 0's narrow one per warp, 214 KiB; its ring needs 276 KiB), on sm_90 (227 KiB a
// block; below, the weights alone do not fit). Inference has no such variant (the Hopper kernel
// takes it on sm_90). Everything they write must be the general kernels' bits.
TEST_F(FusedPipelined, OneStageForwardAndOneBufferBackwardWhereTheRingsDoNotFit) {
  uint64_t seed = 2000;
  for (DType p : {DType::F16, DType::BF16})
    for (const char* act : {"ReLU", "Tanh", "None"})
      for (const char* out_act : {"None", "Sigmoid"})
        for (int64_t batch : {1, 17, 1000, 70000}) {
          const PipelinedCase s{p, 128, 128, 5, 3, act, out_act, batch, false};
          check(s, seed++, PipelinedFrom{kNever, 90, 90});
          if (HasFatalFailure()) return;
        }
}

// The backward that forms the weight gradients inside the pipelined kernel
// (pipelined/backward_weight_grads_kernel.cuh) against the two-step path (pipelined backward writing dZ,
// then weight_grad.cu): the same FP32 sums of the same exact products in another order, so every
// weight gradient must agree to one unit in the last place of its dtype, plus FP32-order noise
// of 1e-5 of the layer's largest gradient (cancellation); Overwrite and Accumulate (onto random
// gradients), repeatable bit for bit, and the fused kernel must have run.
struct DwCase {
  uint32_t in, hidden, out;
  std::string out_act = "None";  // another activation: dZ of the output layer from its kept z
};

::testing::AssertionResult within_rounding(const std::vector<double>& got, const std::vector<double>& want, DType p,
                                           const std::vector<ParamSegment>& segments) {
  const double ulp = p == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;  // relative spacing of the dtype
  for (const ParamSegment& seg : segments) {
    double largest = 0;
    for (size_t i = seg.offset; i < seg.offset + seg.count; ++i) largest = std::max(largest, std::abs(want[i]));
    for (size_t i = seg.offset; i < seg.offset + seg.count; ++i) {
      const double tol = ulp * std::max(std::abs(got[i]), std::abs(want[i])) + 1e-5 * largest;
      if (!std::isfinite(got[i]) || !(std::abs(got[i] - want[i]) <= tol))
        return ::testing::AssertionFailure() << "element " << i << " (layer at " << seg.offset << "): " << got[i]
                                             << " (fused) vs " << want[i] << " (two-step), tolerance " << tol;
    }
  }
  return ::testing::AssertionSuccess();
}

class FusedWeightGrads : public FusedPipelined {};

// Partial rounds of the block's eight warps, one and many rounds; TINYFUSE_QUICK=1 (sanitizer
// runs) keeps the small ones.
std::vector<int64_t> dw_batches() {
  if (const char* q = std::getenv("TINYFUSE_QUICK"); q && *q == '1') return {1, 17, 257, 1000};
  return {1, 17, 255, 256, 257, 1000, 70001, 300001};
}

TEST_F(FusedWeightGrads, MatchTwoStepPathToRounding) {
  if (const char* e = std::getenv("TINYFUSE_FUSED_KERNELS"); e && std::strcmp(e, "general") == 0)
    GTEST_SKIP() << "TINYFUSE_FUSED_KERNELS=general leaves the fused weight gradients out";
  if (compute_capability() < 80) GTEST_SKIP() << "the fused weight gradients need sm_80";
  BuildOptions two_step_kernels{Device::CUDA};
  two_step_kernels.fused_kernels.fused_weight_grads = false;
  uint64_t seed = 5000;
  for (DType p : {DType::F16, DType::BF16})
    for (const DwCase& c : {DwCase{64, 1, 16}, DwCase{32, 2, 64}, DwCase{64, 3, 5}, DwCase{32, 2, 32}, DwCase{64, 2, 64},
                            DwCase{32, 2, 3, "Sigmoid"}, DwCase{64, 3, 32, "Tanh"}})
      for (int64_t batch : dw_batches()) {
        SCOPED_TRACE(std::string(p == DType::BF16 ? "bf16 " : "f16 ") + std::to_string(c.in) + "->64x" +
                     std::to_string(c.hidden) + "->" + std::to_string(c.out) + " " + c.out_act + " batch " +
                     std::to_string(batch));
        json cfg = {{"otype", "FullyFusedMLP"}, {"n_neurons", 64},           {"n_hidden_layers", c.hidden},
                    {"activation", "ReLU"},     {"output_activation", c.out_act}, {"precision", p == DType::BF16 ? "bf16" : "f16"}};
        auto net = create_network(cfg, c.in, c.out, BuildOptions{Device::CUDA});
        auto two_step_net = create_network(cfg, c.in, c.out, two_step_kernels);
        const size_t n = net->n_params();
        const uint32_t W = net->padded_output_width();
        Pcg32 rng(seed++);
        std::vector<float> init(n);
        net->initialize_params(rng, init.data());
        std::vector<double> params(init.begin(), init.end()), input(batch * c.in), dout(batch * W), start(n);
        for (auto& x : input) x = 2 * rng.next_double() - 1;
        for (auto& x : dout) x = 2 * rng.next_double() - 1;
        for (auto& x : start) x = 0.01 * (2 * rng.next_double() - 1);
        Buffer pbuf(Device::CUDA, n * dtype_size(p)), gbuf(Device::CUDA, n * dtype_size(p));
        const TensorView pview = pbuf.vector(p, n), gview = gbuf.vector(p, n);
        upload(pview, params);
        net->set_params(pview, pview, gview);
        two_step_net->set_params(pview, pview, gview);
        DeviceMatrix in(p, batch, c.in, false), out(p, batch, W, false), dy(p, batch, W, false);
        upload(in.view, input);
        upload(dy.view, dout);
        DeviceMatrix dx(p, batch, c.in, false);
        auto ctx = net->forward(in.view, &out.view);
        // The parameter gradients, and (with_dx) dL/dinput into *dx_out, each written over NaN.
        auto grads = [&](bool fused, GradientMode mode, bool with_dx, std::vector<double>* dx_out) {
          Network& which = fused ? *net : *two_step_net;
          if (mode == GradientMode::Accumulate)
            upload(gview, start);
          else
            fill_tensor(gview, kNaN);
          if (with_dx) fill_tensor(dx.view, kNaN);
          which.backward(*ctx, in.view, out.view, dy.view, with_dx ? &dx.view : nullptr, false, mode);
          EXPECT_EQ(cuda::fused_kernel_used(which, fz::FusedPass::BackwardWeightGrads),
                    fused ? fz::FusedKernel::PipelinedWeightGrads : fz::FusedKernel::None)
              << "which backward ran";
          if (dx_out) *dx_out = download(dx.view);
          return download(gview);
        };
        // dL/dinput (an encoding before the network asks for it) comes from the same dZ_0 and
        // the same products in both paths: the same bits.
        for (bool with_dx : {false, true})
          for (GradientMode mode : {GradientMode::Overwrite, GradientMode::Accumulate}) {
            SCOPED_TRACE(std::string(mode == GradientMode::Overwrite ? "overwrite" : "accumulate") +
                         (with_dx ? ", with dL/dinput" : ""));
            std::vector<double> dx_two_step, dx_fused;
            const std::vector<double> two_step = grads(false, mode, with_dx, &dx_two_step),
                                      fused = grads(true, mode, with_dx, &dx_fused),
                                      again = grads(true, mode, with_dx, nullptr);
            EXPECT_TRUE(within_rounding(fused, two_step, p, net->param_segments()));
            EXPECT_TRUE(same_bits(again, fused)) << "repeated fused weight gradients differ";
            if (with_dx) EXPECT_TRUE(same_bits(dx_fused, dx_two_step)) << "dL/dinput";
          }
        if (HasFatalFailure()) return;
      }
}

}  // namespace
