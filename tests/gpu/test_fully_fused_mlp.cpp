// FullyFusedMLP on CUDA (FP16 and BF16) against an FP64 reference: forward, inference, input and
// parameter gradients in every gradient mode, every activation, widths 16/32/64/128, depths 1-3,
// odd batch sizes, strided views, bitwise-repeatable launches (batch 0: tests/conformance/), layout and
// initialisation shared with the CPU network, argument checks, and 100 Trainer steps against the
// CPU trainer. Runs on the device machine; skips without a GPU.
//
// Reference. The fused kernels round to the storage type T exactly where a layer-by-layer
// implementation would store a value (src/cuda/fused/launch.h): z, y = act(z), dY, dZ. The
// reference runs each layer as an FP64 CPU CutlassMLP of depth 0 (one bias-free product, the
// same layout) and applies activations and that rounding on the host, so the two differ only by
// FP32 vs FP64 accumulation and the final rounding of dL/dinput and the gradients. (An
// end-to-end FP64 reference cannot be met at 2e-3 by any network that stores FP16 activations:
// see tests/gpu/test_blaslt_mlp.cpp.)
//
// Tolerances (relative L2). FP16: 2e-3, the project's FP16 bound, about 4 units of FP16's
// roundoff u = 2^-11. BF16: the same 4 units of BF16's roundoff u = 2^-8, i.e. 2e-3 * 2^3 =
// 1.6e-2: BF16 keeps 8 significant bits to FP16's 11, so every rounding the kernels (and the
// reference) perform is 8 times coarser, and the final rounding of results alone contributes
// about u / sqrt(3) = 2.3e-3 of relative L2 in BF16 (2.8e-4 in FP16).
//
// Kinks. ReLU and LeakyReLU jump in derivative at 0, and the kernels' z (FP32 tensor-core sums;
// below layer 0 from inputs whose FP16 rounding may differ from the reference's by an ulp) is not
// the reference's z: one that close to 0 takes the other side and moves that dZ by a whole dY,
// which no tolerance should absorb. Input rows are therefore redrawn away from kinks (see
// avoid_kinks), as test_portable_mlp.cpp does.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/activation_math.h"
#include "core/half.h"
#include "testing/device_matrix.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
using tinyfuse::testing::download;
using tinyfuse::testing::upload;

namespace {

const BuildOptions kGpu{Device::CUDA};
const BuildOptions kF64{Device::CPU, DType::F64};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class FullyFusedMlp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

struct Shape {
  uint32_t in, neurons, hidden, out;  // out: the model's output width (padded to 16 by the network)
};

std::string describe(const Shape& s) {
  return std::to_string(s.in) + "->" + std::to_string(s.neurons) + "x" + std::to_string(s.hidden) + "->" +
         std::to_string(s.out);
}

const char* precision_name(DType p) { return p == DType::BF16 ? "bf16" : "f16"; }
double tolerance(DType p) { return p == DType::BF16 ? 1.6e-2 : 2e-3; }

json net_config(const Shape& s, const std::string& act, const std::string& out_act, DType p) {
  return {{"otype", "FullyFusedMLP"}, {"n_neurons", s.neurons},       {"n_hidden_layers", s.hidden},
          {"activation", act},        {"output_activation", out_act}, {"precision", precision_name(p)}};
}

double round_to(DType p, double v) {
  const float f = static_cast<float>(v);
  return p == DType::BF16 ? bf16_bits_to_float(float_to_bf16_bits(f)) : half_bits_to_float(float_to_half_bits(f));
}
std::vector<double> rounded(DType p, std::vector<double> v) {
  for (auto& x : v) x = round_to(p, x);
  return v;
}
std::vector<double> random_rounded(Pcg32& rng, size_t n, DType p) {
  std::vector<double> v(n);
  for (auto& x : v) x = round_to(p, 2 * rng.next_double() - 1);
  return v;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (!std::isfinite(num)) return std::numeric_limits<double>::infinity();
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}

using tinyfuse::testing::DeviceMatrix;

// The layer-wise FP64 reference with T-rounded storage (see the top of the file).
void rounded_storage_reference(DType p, const Network& net, int64_t batch, const std::vector<double>& params,
                               const std::vector<double>& input, const std::vector<double>& dout,
                               std::vector<double>& out, std::vector<double>& dx_out, std::vector<double>& grads) {
  const auto segs = net.param_segments();  // one weight matrix per layer
  const size_t n_layers = segs.size();
  std::vector<std::unique_ptr<Network>> layers(n_layers);
  std::vector<std::unique_ptr<Context>> ctxs(n_layers);
  std::vector<std::vector<double>> x(n_layers + 1), z(n_layers), lp(n_layers), lg(n_layers);
  x[0] = input;
  auto act_of = [&](size_t l) { return l + 1 == n_layers ? net.output_activation() : net.activation(); };
  for (size_t l = 0; l < n_layers; ++l) {
    const ParamSegment& w = segs[l];
    const uint32_t in = w.fan_in, width = w.fan_out;
    json lin = {{"otype", "CutlassMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 0}, {"activation", "None"}, {"output_activation", "None"}};
    layers[l] = create_network(lin, in, width, kF64);
    EXPECT_EQ(layers[l]->n_params(), w.count);
    lp[l].assign(params.begin() + w.offset, params.begin() + w.offset + w.count);
    lg[l].assign(w.count, 0.0);
    const TensorView pv = TensorView::vector(lp[l].data(), lp[l].size());
    layers[l]->set_params(pv, pv, TensorView::vector(lg[l].data(), lg[l].size()));
    std::vector<double> zl(batch * width);
    const TensorView zv = TensorView::matrix(zl.data(), batch, width);
    ctxs[l] = layers[l]->forward(TensorView::matrix(x[l].data(), batch, in), &zv);
    z[l] = rounded(p, zl);
    std::vector<double> y(zl.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = activate(act_of(l), z[l][i]);
    x[l + 1] = rounded(p, y);
  }
  out = x[n_layers];
  std::vector<double> dy = dout;
  for (size_t l = n_layers; l-- > 0;) {
    const ParamSegment& w = segs[l];
    const uint32_t in = w.fan_in, width = w.fan_out;
    std::vector<double> dz(dy.size());
    for (size_t i = 0; i < dz.size(); ++i) dz[i] = dy[i] * activate_derivative(act_of(l), z[l][i]);
    dz = rounded(p, dz);
    std::vector<double> dx(batch * in), unused(batch * width);
    const TensorView dxv = TensorView::matrix(dx.data(), batch, in);
    layers[l]->backward(*ctxs[l], TensorView::matrix(x[l].data(), batch, in), TensorView::matrix(unused.data(), batch, width),
                        TensorView::matrix(dz.data(), batch, width), &dxv);
    std::copy(lg[l].begin(), lg[l].end(), grads.begin() + w.offset);
    dy = l > 0 ? rounded(p, dx) : dx;
  }
  dx_out = dy;
}

struct Case {
  DType precision;
  Shape shape;
  std::string act, out_act;
  int64_t batch;
  bool strided;
  uint64_t seed;
  bool away_from_kinks = true;  // redraw input rows near a ReLU/LeakyReLU kink (avoid_kinks)
};

// How far from 0 every reference pre-activation feeding a ReLU or LeakyReLU is kept. Evidence,
// from a CPU emulation of the kernels (FP32 sums, T rounding where they round) on this file's
// data, which reproduced the H200's failing numbers to 3-4 digits when inputs were drawn freely:
// in F16 ReLU 64->128x2->128 at batch 257 one layer-0 z of 4.5e-8 rounds to 2^-24 in the
// reference (derivative 1) but sums to 2^-25 in FP32 and rounds to 0 (derivative 0); that one
// element alone put the input gradient at 3.2e-3 and the first layer's weight gradient at 2.9e-3
// (LeakyReLU: 3.1e-3, 2.8e-3). In 16->128x3->7 one layer-2 z of -1.1e-5, +1.7e-5 in the kernels,
// put every gradient below it at 7e-3 to 1e-2. A reference on the kernels' side of that element
// leaves 2.1e-4 (bound 2e-3). Over every ReLU/LeakyReLU case here the kernels' z differed from
// the reference's by at most 4.8e-4 (of max(1, |z|); FP16 and BF16); with this margin the
// emulation puts no element on the other side, and its worst FP16 error is 3.3e-4.
constexpr double kKinkMargin = 1e-3;

bool has_kink(Activation a) { return a == Activation::ReLU || a == Activation::LeakyReLU; }

// Redraws (from rng, rounded to p) every input row for which some pre-activation feeding a kink
// lies within kKinkMargin of 0 in the reference (FP64 sums of T-rounded values), until none does.
// Rows are independent, so only redrawn rows are evaluated again.
void avoid_kinks(DType p, const Network& net, int64_t batch, const std::vector<double>& params,
                 std::vector<double>& input, Pcg32& rng) {
  const auto segs = net.param_segments();
  const size_t n_layers = segs.size();
  auto act_of = [&](size_t l) { return l + 1 == n_layers ? net.output_activation() : net.activation(); };
  bool any_kink = false;
  for (size_t l = 0; l < n_layers; ++l) any_kink |= has_kink(act_of(l));
  if (!any_kink) return;
  const uint32_t in = segs[0].fan_in;
  std::vector<int64_t> pending(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) pending[b] = b;
  std::vector<double> x, y;
  for (int round = 0; !pending.empty(); ++round) {
    std::vector<int64_t> near;
    for (int64_t b : pending) {
      x.assign(input.begin() + b * in, input.begin() + (b + 1) * in);
      bool close = false;
      for (size_t l = 0; l < n_layers && !close; ++l) {
        const ParamSegment& w = segs[l];
        const Activation a = act_of(l);
        y.assign(w.fan_out, 0.0);
        for (uint32_t o = 0; o < w.fan_out; ++o) {
          const double* row = params.data() + w.offset + static_cast<size_t>(o) * w.fan_in;
          double z = 0;
          for (uint32_t k = 0; k < w.fan_in; ++k) z += row[k] * x[k];
          close |= has_kink(a) && std::abs(z) < kKinkMargin;
          y[o] = round_to(p, activate(a, round_to(p, z)));
        }
        x.swap(y);
      }
      if (close) near.push_back(b);
    }
    if (!near.empty() && round == 100) {
      ADD_FAILURE() << near.size() << " input rows still have a pre-activation within " << kKinkMargin
                    << " of a kink after 100 redraws";
      return;
    }
    for (int64_t b : near)
      for (uint32_t k = 0; k < in; ++k) input[b * in + k] = round_to(p, 2 * rng.next_double() - 1);
    pending.swap(near);
  }
}

std::string describe(const Case& c) {
  return std::string("FullyFusedMLP ") + precision_name(c.precision) + " " + describe(c.shape) + " " + c.act + "/" +
         c.out_act + " batch " + std::to_string(c.batch) + (c.strided ? " strided" : "");
}

// One configuration through every entry point, against the reference.
void check_case(const Case& c) {
  SCOPED_TRACE(describe(c));
  const DType p = c.precision;
  const Shape& s = c.shape;
  const int64_t batch = c.batch;
  auto gpu = create_network(net_config(s, c.act, c.out_act, p), s.in, s.out, kGpu);
  ASSERT_EQ(gpu->param_dtype(), p);
  const uint32_t W = gpu->padded_output_width();
  ASSERT_EQ(W, (s.out + 15) / 16 * 16);
  const size_t n = gpu->n_params();

  Pcg32 rng(c.seed);
  std::vector<float> init(n);
  // Stacked exponentials grow doubly exponentially: start them smaller (as the CPU tests do).
  gpu->initialize_params(rng, init.data(), c.act == "Exponential" ? 0.3f : 1.0f);
  std::vector<double> params(n);
  for (size_t i = 0; i < n; ++i) params[i] = round_to(p, init[i]);
  std::vector<double> input = random_rounded(rng, batch * s.in, p);
  if (c.away_from_kinks) avoid_kinks(p, *gpu, batch, params, input, rng);
  const std::vector<double> dout = random_rounded(rng, batch * W, p);

  std::vector<double> ref_grads(n), ref_out, ref_dx;
  rounded_storage_reference(p, *gpu, batch, params, input, dout, ref_out, ref_dx, ref_grads);

  const double tol = tolerance(p);
  Buffer pbuf(Device::CUDA, n * dtype_size(p)), gbuf(Device::CUDA, n * dtype_size(p));
  const TensorView pview = pbuf.vector(p, n), gview = gbuf.vector(p, n);
  upload(pview, params);
  gpu->set_params(pview, pview, gview);
  DeviceMatrix in(p, batch, s.in, c.strided), out(p, batch, W, c.strided), out2(p, batch, W, c.strided);
  DeviceMatrix dy(p, batch, W, c.strided), dx(p, batch, s.in, c.strided);
  upload(in.view, input);
  upload(dy.view, dout);

  out.poison();
  auto ctx = gpu->forward(in.view, &out.view);
  const std::vector<double> got_out = download(out.view);
  EXPECT_LE(rel_l2(got_out, ref_out), tol) << "forward";
  out2.poison();
  auto ctx2 = gpu->forward(in.view, &out2.view);
  EXPECT_TRUE(bitwise_equal(download(out2.view), got_out)) << "repeated forward differs";
  ctx2.reset();

  out.poison();
  gpu->inference(in.view, out.view);
  const std::vector<double> got_inf = download(out.view);
  EXPECT_TRUE(bitwise_equal(got_inf, got_out)) << "inference differs from forward";
  out.poison();
  gpu->inference(in.view, out.view);
  EXPECT_TRUE(bitwise_equal(download(out.view), got_inf)) << "repeated inference differs";
  if (c.strided) {  // the padding columns around the strided views stay poisoned
    const std::vector<double> whole = download(out.whole);
    bool untouched = true;
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t col : {int64_t(0), int64_t(W + 1), int64_t(W + 2)}) untouched &= std::isnan(whole[r * (W + 3) + col]);
    EXPECT_TRUE(untouched) << "inference wrote outside the output view";
  }

  // Overwrite.
  dx.poison();
  fill_tensor(gview, kNaN);
  gpu->backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Overwrite);
  const std::vector<double> got_dx = download(dx.view), got_grads = download(gview);
  EXPECT_LE(rel_l2(got_dx, ref_dx), tol) << "input gradient";
  EXPECT_LE(rel_l2(got_grads, ref_grads), tol) << "parameter gradient";
  // Per layer too: a wrong small layer must not hide behind a large one.
  for (const auto& seg : gpu->param_segments()) {
    std::vector<double> g(got_grads.begin() + seg.offset, got_grads.begin() + seg.offset + seg.count);
    std::vector<double> r(ref_grads.begin() + seg.offset, ref_grads.begin() + seg.offset + seg.count);
    EXPECT_LE(rel_l2(g, r), tol) << "weight gradient of the " << seg.fan_out << " x " << seg.fan_in << " layer at " << seg.offset;
  }

  // Repeated: bitwise identical.
  dx.poison();
  fill_tensor(gview, kNaN);
  gpu->backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Overwrite);
  EXPECT_TRUE(bitwise_equal(download(dx.view), got_dx)) << "repeated input gradient differs";
  EXPECT_TRUE(bitwise_equal(download(gview), got_grads)) << "repeated parameter gradient differs";

  // Accumulate onto the gradients just written: twice the reference.
  gpu->backward(*ctx, in.view, out.view, dy.view, nullptr, false, GradientMode::Accumulate);
  std::vector<double> twice = ref_grads;
  for (auto& g : twice) g *= 2;
  EXPECT_LE(rel_l2(download(gview), twice), tol) << "accumulated parameter gradient";

  // Ignore: gradients untouched, input gradient still computed.
  fill_tensor(gview, 7.0);
  dx.poison();
  gpu->backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Ignore);
  EXPECT_EQ(sum_tensor(gview), 7.0 * n) << "GradientMode::Ignore wrote gradients";
  EXPECT_TRUE(bitwise_equal(download(dx.view), got_dx)) << "input gradient with GradientMode::Ignore";

  // Overwrite without an input gradient. Where the backward forms the weight gradients inside
  // the pipelined kernel (64 wide ReLU shapes, pipelined/launch.h) their sums run in another order
  // than with dL/dinput, so: against the reference, and repeatable bit for bit.
  // (FusedPipelined / FusedWeightGrads compare the two paths directly.)
  fill_tensor(gview, kNaN);
  gpu->backward(*ctx, in.view, out.view, dy.view, nullptr, false, GradientMode::Overwrite);
  const std::vector<double> grads_no_dx = download(gview);
  EXPECT_LE(rel_l2(grads_no_dx, ref_grads), tol) << "parameter gradient without dL_dinput";
  for (const auto& seg : gpu->param_segments()) {
    std::vector<double> g(grads_no_dx.begin() + seg.offset, grads_no_dx.begin() + seg.offset + seg.count);
    std::vector<double> r(ref_grads.begin() + seg.offset, ref_grads.begin() + seg.offset + seg.count);
    EXPECT_LE(rel_l2(g, r), tol) << "weight gradient without dL_dinput, layer at " << seg.offset;
  }
  fill_tensor(gview, kNaN);
  gpu->backward(*ctx, in.view, out.view, dy.view, nullptr, false, GradientMode::Overwrite);
  EXPECT_TRUE(bitwise_equal(download(gview), grads_no_dx)) << "repeated parameter gradient without dL_dinput differs";
}

const std::string kActivations[] = {"ReLU", "Tanh",     "Sigmoid",    "None",     "Sine",
                                    "SiLU", "LeakyReLU", "Squareplus", "Softplus", "Exponential"};

// Every hidden width at depths 1-3, with input widths from 16 to 128 and outputs that pad to 16
// (3, 5, 7, 1), are already 16, or span several 16-column chunks (20, 32, 64, 128).
const Shape kShapes[] = {{32, 16, 1, 3},   {16, 16, 2, 16},  {16, 16, 3, 20},  {64, 32, 1, 5},
                         {32, 32, 2, 32},  {48, 32, 3, 1},   {64, 64, 1, 16},  {64, 64, 2, 64},
                         {32, 64, 3, 3},   {128, 128, 1, 16}, {64, 128, 2, 128}, {16, 128, 3, 7}};
const int64_t kAllBatches[] = {1, 16, 17, 255, 256, 257, 1000};

class FullyFusedMlpActivations : public ::testing::TestWithParam<std::tuple<DType, std::string>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(FullyFusedMlpActivations, MatchesFp64Reference) {
  const auto& [precision, act] = GetParam();
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    // As the hidden activation: every batch size at depth 2, the padding boundaries elsewhere...
    if (s.hidden == 2)
      for (int64_t batch : kAllBatches) check_case({precision, s, act, "None", batch, false, seed++});
    else
      for (int64_t batch : {1, 17, 257}) check_case({precision, s, act, "None", batch, false, seed++});
    // ... as the output activation behind Tanh hidden layers, and with strided views.
    check_case({precision, s, "Tanh", act, 257, false, seed++});
    check_case({precision, s, act, "None", 17, true, seed++});
    if (::testing::Test::HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(All, FullyFusedMlpActivations,
                         ::testing::Combine(::testing::Values(DType::F16, DType::BF16), ::testing::ValuesIn(kActivations)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == DType::F16 ? "F16_" : "BF16_") +
                                  std::get<1>(info.param);
                         });

TEST_F(FullyFusedMlp, LargeBatch) {
  for (uint32_t w : {16u, 32u, 64u, 128u}) check_case({DType::F16, {64, w, 2, 16}, "ReLU", "None", 65536, false, 90 + w});
  for (const Shape& s : {Shape{64, 64, 2, 64}, Shape{128, 128, 2, 128}}) {
    check_case({DType::F16, s, "Tanh", "None", 65536, false, 99});
    check_case({DType::BF16, s, "ReLU", "None", 65536, false, 98});
  }
}

// Deep and wide enough that the weights do not all fit in shared memory at once: the kernels
// restage them layer by layer. Nine layers also take two weight-gradient launches (eight, then one).
TEST_F(FullyFusedMlp, WeightsStagedLayerByLayer) {
  check_case({DType::F16, {128, 128, 8, 16}, "SiLU", "None", 1000, false, 5});
  // Eight ReLU layers put 1024 kink pre-activations in every row: at kKinkMargin nearly every
  // row has one, so rows are left as drawn. The emulation (see kKinkMargin) finds none on the
  // other side here, and a single one (about 3e-3 at 257 x 128) is well inside BF16's 1.6e-2.
  check_case({DType::BF16, {128, 128, 8, 16}, "ReLU", "Sigmoid", 257, false, 6, false});
}

TEST_F(FullyFusedMlp, LayoutAndInitialisationMatchCpu) {
  for (DType p : {DType::F16, DType::BF16})
    for (const char* act : {"ReLU", "Sine"}) {
      const Shape s{32, 64, 2, 5};
      auto gpu = create_network(net_config(s, act, "None", p), s.in, s.out, kGpu);
      auto cpu = create_network(net_config(s, act, "None", p), s.in, s.out);
      ASSERT_EQ(gpu->n_params(), cpu->n_params());
      EXPECT_EQ(gpu->n_params(), 64u * 32 + 64 * 64 + 16 * 64);
      EXPECT_EQ(gpu->param_dtype(), p);
      EXPECT_EQ(gpu->input_dtype(), p);
      EXPECT_EQ(gpu->output_dtype(), p);
      EXPECT_EQ(gpu->device(), Device::CUDA);
      EXPECT_FALSE(gpu->has_biases());
      EXPECT_EQ(gpu->padded_output_width(), 16u);
      EXPECT_EQ(gpu->required_input_alignment(), 16u);
      EXPECT_EQ(gpu->hyperparams(), cpu->hyperparams());
      EXPECT_EQ(gpu->hyperparams().at("precision"), precision_name(p));
      const auto gs = gpu->param_segments(), cs = cpu->param_segments();
      ASSERT_EQ(gs.size(), cs.size());
      for (size_t i = 0; i < gs.size(); ++i) {
        EXPECT_EQ(gs[i].offset, cs[i].offset);
        EXPECT_EQ(gs[i].count, cs[i].count);
        EXPECT_EQ(gs[i].kind, cs[i].kind);
      }
      std::vector<float> a(gpu->n_params()), b(cpu->n_params());
      Pcg32 r1(5), r2(5);
      gpu->initialize_params(r1, a.data(), 0.5f);
      cpu->initialize_params(r2, b.data(), 0.5f);
      EXPECT_EQ(a, b) << act;
    }
}

TEST_F(FullyFusedMlp, RejectsBadArguments) {
  const Shape s{16, 32, 1, 8};
  auto net = create_network(net_config(s, "ReLU", "None", DType::F16), s.in, s.out, kGpu);
  const size_t n = net->n_params();
  const uint32_t W = net->padded_output_width();
  Buffer in_buf(Device::CUDA, 4 * s.in * 4), out_buf(Device::CUDA, 4 * W * 4);
  const TensorView in16 = in_buf.matrix(DType::F16, 4, s.in), out16 = out_buf.matrix(DType::F16, 4, W);
  EXPECT_THROW(net->inference(in16, out16), Error) << "no parameters set";
  Buffer pbuf(Device::CUDA, n * 4);
  EXPECT_THROW(net->set_params(pbuf.vector(DType::F32, n), pbuf.vector(DType::F32, n), {}), ShapeError);
  EXPECT_THROW(net->set_params(pbuf.vector(DType::BF16, n), pbuf.vector(DType::BF16, n), {}), ShapeError);
  EXPECT_THROW(net->set_params(pbuf.vector(DType::F16, n - 1), pbuf.vector(DType::F16, n - 1), {}), ShapeError);
  net->set_params(pbuf.vector(DType::F16, n), pbuf.vector(DType::F16, n), {});
  fill_tensor(pbuf.vector(DType::F16, n), 0.0);
  EXPECT_THROW(net->inference(in_buf.matrix(DType::F32, 4, s.in), out16), ShapeError);           // dtype
  EXPECT_THROW(net->inference(in_buf.matrix(DType::BF16, 4, s.in), out16), ShapeError);          // dtype
  EXPECT_THROW(net->inference(in16, out_buf.matrix(DType::F16, 3, W)), ShapeError);              // rows
  EXPECT_THROW(net->inference(in_buf.matrix(DType::F16, 4, s.in + 1), out16), ShapeError);       // width
  EXPECT_THROW(net->inference(in16, out_buf.matrix(DType::F16, 4, s.out)), ShapeError);          // unpadded output
  std::vector<float> host(4 * s.in);
  EXPECT_THROW(net->inference(TensorView::matrix(host.data(), 4, s.in), out16), ShapeError);  // device
  auto ctx = net->forward(in16, &out16);
  EXPECT_THROW(net->backward(*ctx, in16, out16, out16, nullptr), Error) << "no gradient buffer";
  net->backward(*ctx, in16, out16, out16, nullptr, false, GradientMode::Ignore);  // fine without one
  EXPECT_THROW(net->backward(*ctx, in16.rows_slice(0, 2), out16, out_buf.matrix(DType::F16, 2, W), nullptr, false,
                             GradientMode::Ignore),
               ShapeError)
      << "batch differs from the forward";
  synchronize(Device::CUDA, nullptr);
  // Config rules shared with the CPU.
  EXPECT_THROW(create_network({{"otype", "FullyFusedMLP"}, {"n_neurons", 48}}, 16, 4, kGpu), ConfigError);
  EXPECT_THROW(create_network({{"otype", "FullyFusedMLP"}, {"n_neurons", 64}}, 20, 4, kGpu), ConfigError);
  EXPECT_THROW(create_network({{"otype", "FullyFusedMLP"}, {"precision", "f32"}}, 16, 4, kGpu), ConfigError);
}

// 100 Trainer steps (L2, Adam, loss scale 128, FP32 master weights in the optimizer) of the
// 64 -> 64 x 2 -> 64 network follow the CPU trainer running the same FullyFusedMLP config in FP32,
// from the same initial parameters and inputs (rounded to T for both). Bound on |GPU - CPU| / CPU
// loss at every step: FP16 3e-2, the project's bound for FP16 networks (BlasLtMLPFP16 in
// test_qualification.cpp); BF16 the same bound scaled by the ratio of the unit roundoffs,
// 3e-2 * 2^-8 / 2^-11 = 0.24 (derived, not fitted). Both runs must also actually learn.
TEST_F(FullyFusedMlp, TrainingFollowsCpuTrainer) {
  for (DType p : {DType::F16, DType::BF16})
    for (const char* act : {"ReLU", "SiLU"}) {
      SCOPED_TRACE(std::string(precision_name(p)) + " " + act);
      const double tol = p == DType::BF16 ? 0.24 : 3e-2;
      json cfg = {{"loss", {{"otype", "L2"}}},
                  {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-3}}},
                  {"network", {{"otype", "FullyFusedMLP"}, {"n_neurons", 64}, {"n_hidden_layers", 2}, {"activation", act},
                               {"precision", precision_name(p)}}}};
      Model gpu = create_from_config(64, 64, cfg, kGpu, 1337);
      Model cpu = create_from_config(64, 64, cfg, {Device::CPU}, 1337);
      ASSERT_EQ(gpu.network->param_dtype(), p);
      ASSERT_EQ(gpu.trainer->params_host(), cpu.trainer->params_host()) << "same seed, same layout, same initial parameters";
      ASSERT_EQ(gpu.trainer->loss_scale(), 128.0f);
      const int64_t batch = 1024;
      Pcg32 rng(3);
      Buffer xin(Device::CUDA, batch * 64 * 2), target(Device::CUDA, batch * 64 * sizeof(float));
      std::vector<float> x(batch * 64), y(batch * 64);
      float first = 0, last = 0;
      for (int step = 0; step < 100; ++step) {
        for (int64_t i = 0; i < batch * 64; ++i) {
          x[i] = static_cast<float>(round_to(p, rng.next_float() * 2 - 1));
          y[i] = std::sin(3 * x[i]);
        }
        copy_tensor(xin.matrix(p, batch, 64), TensorView::matrix(x.data(), batch, 64));
        copy_tensor(target.matrix(DType::F32, batch, 64), TensorView::matrix(y.data(), batch, 64));
        const float lg = gpu.trainer->training_step(xin.matrix(p, batch, 64), target.matrix(DType::F32, batch, 64));
        const float lc = cpu.trainer->training_step(TensorView::matrix(x.data(), batch, 64), TensorView::matrix(y.data(), batch, 64));
        ASSERT_NEAR(lg, lc, tol * std::abs(lc)) << "step " << step;
        if (step == 0) first = lg;
        last = lg;
      }
      EXPECT_LT(last, first) << "the loss must fall";
    }
}

}  // namespace
