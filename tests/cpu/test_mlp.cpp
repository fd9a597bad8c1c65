// The CPU MLPs: parameter layout, gradients (finite differences in FP64), strided views and
// shape errors. Gradient modes, poisoned outputs, repeats and batch shapes are the conformance
// suite's (tests/conformance/test_network_conformance.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "testing/gradcheck.h"
#include "testing/mlp_cases.h"

using namespace tinyfuse;
using tinyfuse::testing::kF64;
using tinyfuse::testing::kMlpShapes;
using tinyfuse::testing::MlpShape;
using tinyfuse::testing::net_config;
using tinyfuse::testing::gradcheck;
using tinyfuse::testing::random_vector;

namespace {

class MlpGradients : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(MlpGradients, MatchFiniteDifferences) {
  const auto& [act, batch] = GetParam();
  Pcg32 rng(42 + batch);
  for (const MlpShape& s : kMlpShapes) {
    // Each activation is checked as the hidden activation and as the output activation.
    for (int as_output = 0; as_output < 2; ++as_output) {
      json cfg = net_config(s.otype, s.neurons, s.hidden, as_output ? "Tanh" : act, as_output ? act : "None");
      auto net = create_network(cfg, s.in, s.out, kF64);
      // Stacked exponentials grow doubly exponentially (exp(exp(...)) reaches 1e30 in four
      // layers at unit scale), where no finite difference is meaningful: start them smaller.
      const float scale = !as_output && act == "Exponential" ? 0.3f : 1.0f;
      auto r = gradcheck(*net, batch, rng, scale);
      EXPECT_LT(r.max_input_error, 1e-6) << s.otype << " " << cfg.dump() << " batch " << batch;
      EXPECT_LT(r.max_param_error, 1e-6) << s.otype << " " << cfg.dump() << " batch " << batch;
      EXPECT_GT(r.n_checked, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllActivations, MlpGradients,
                         ::testing::Combine(::testing::Values("None", "ReLU", "LeakyReLU", "SiLU", "Exponential", "Sine",
                                                              "Sigmoid", "Squareplus", "Softplus", "Tanh"),
                                            ::testing::Values(1, 7, 256, 1000)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_batch" + std::to_string(std::get<1>(info.param));
                         });

TEST(Mlp, ParameterLayoutMatchesDocs) {
  // PortableMLP: W0 (n x in), b0, W1 (n x n), b1, W2 (out x n), b2.
  auto p = create_network(net_config("PortableMLP", 64, 2, "ReLU", "None"), 64, 64);
  EXPECT_EQ(p->n_params(), 64u * 64 * 3 + 64 * 3);  // 12,480: the Width64FusedMLP layout
  EXPECT_EQ(p->padded_output_width(), 64u);
  // FullyFusedMLP: no biases, output padded to 16.
  auto f = create_network(net_config("FullyFusedMLP", 64, 2, "ReLU", "None"), 32, 3);
  EXPECT_EQ(f->padded_output_width(), 16u);
  EXPECT_EQ(f->output_width(), 3u);
  EXPECT_EQ(f->n_params(), 64u * 32 + 64 * 64 + 16 * 64);
  auto segs = f->param_segments();
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[2].offset, 64u * 32 + 64 * 64);
  EXPECT_EQ(segs[2].fan_out, 16u);
}

TEST(Mlp, ForwardMatchesHandComputation) {
  // 2 -> 2 (ReLU) -> 1 PortableMLP with chosen weights.
  auto net = create_network(net_config("PortableMLP", 2, 1, "ReLU", "None"), 2, 1, kF64);
  std::vector<double> params = {1, -1, 2, 0.5,  // W0
                                0.1, -0.2,      // b0
                                3, -4,          // W1
                                0.25};          // b1
  auto pv = TensorView::vector(params.data(), 9);
  net->set_params(pv, pv, TensorView{});
  std::vector<double> x = {0.5, 0.25}, y(1, -999);
  net->inference(TensorView::matrix(x.data(), 1, 2), TensorView::matrix(y.data(), 1, 1));
  const double h0 = std::max(0.0, 1 * 0.5 - 1 * 0.25 + 0.1), h1 = std::max(0.0, 2 * 0.5 + 0.5 * 0.25 - 0.2);
  EXPECT_DOUBLE_EQ(y[0], 3 * h0 - 4 * h1 + 0.25);
}

TEST(Mlp, FloatAgreesWithDoubleReference) {
  Pcg32 rng(11);
  json cfg = net_config("CutlassMLP", 64, 2, "ReLU", "Sigmoid");
  auto f32 = create_network(cfg, 32, 8);
  auto f64 = create_network(cfg, 32, 8, kF64);
  std::vector<float> pf(f32->n_params());
  f32->initialize_params(rng, pf.data(), 1);
  std::vector<double> pd(pf.begin(), pf.end());
  f32->set_params(TensorView::vector(pf.data(), pf.size()), TensorView::vector(pf.data(), pf.size()), TensorView{});
  f64->set_params(TensorView::vector(pd.data(), pd.size()), TensorView::vector(pd.data(), pd.size()), TensorView{});
  const int64_t batch = 300;
  auto xd = random_vector(rng, batch * 32);
  std::vector<float> xf(xd.begin(), xd.end());
  std::vector<float> yf(batch * 16, NAN);
  std::vector<double> yd(batch * 16, NAN);
  f32->inference(TensorView::matrix(xf.data(), batch, 32), TensorView::matrix(yf.data(), batch, 16));
  f64->inference(TensorView::matrix(xd.data(), batch, 32), TensorView::matrix(yd.data(), batch, 16));
  double num = 0, den = 0;
  for (size_t i = 0; i < yd.size(); ++i) {
    ASSERT_TRUE(std::isfinite(yf[i])) << "output element " << i << " not written";
    num += (yf[i] - yd[i]) * (yf[i] - yd[i]);
    den += yd[i] * yd[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-6);
}

TEST(Mlp, StridedViewsReadAndWriteOnlyTheirColumns) {
  Pcg32 rng(5);
  auto net = create_network(net_config("PortableMLP", 16, 1, "ReLU", "None"), 3, 2, kF64);
  std::vector<float> init(net->n_params());
  net->initialize_params(rng, init.data(), 1);
  std::vector<double> params(init.begin(), init.end());
  auto pv = TensorView::vector(params.data(), params.size());
  net->set_params(pv, pv, TensorView{});
  const int64_t batch = 5;
  auto dense = random_vector(rng, batch * 3);
  std::vector<double> wide(batch * 7, 0.0);  // input in columns 2..4 of a 7-wide matrix
  for (int64_t b = 0; b < batch; ++b)
    for (int d = 0; d < 3; ++d) wide[b * 7 + 2 + d] = dense[b * 3 + d];
  std::vector<double> out_dense(batch * 2), out_wide(batch * 6, -7.0);
  net->inference(TensorView::matrix(dense.data(), batch, 3), TensorView::matrix(out_dense.data(), batch, 2));
  net->inference(TensorView::matrix(wide.data(), batch, 7).cols_slice(2, 3),
                 TensorView::matrix(out_wide.data(), batch, 6).cols_slice(1, 2));
  for (int64_t b = 0; b < batch; ++b)
    for (int d = 0; d < 6; ++d) {
      if (d == 1 || d == 2) EXPECT_DOUBLE_EQ(out_wide[b * 6 + d], out_dense[b * 2 + d - 1]);
      else EXPECT_EQ(out_wide[b * 6 + d], -7.0) << "wrote outside its view";
    }
}

TEST(Mlp, RejectsBadTensors) {
  auto net = create_network(net_config("PortableMLP", 8, 1, "ReLU", "None"), 4, 2);
  std::vector<float> params(net->n_params(), 0.1f);
  auto pv = TensorView::vector(params.data(), params.size());
  net->set_params(pv, pv, TensorView{});
  std::vector<float> x(40), y(40);
  std::vector<double> xd(40);
  EXPECT_THROW(net->inference(TensorView::matrix(x.data(), 10, 3), TensorView::matrix(y.data(), 10, 2)), ShapeError);
  EXPECT_THROW(net->inference(TensorView::matrix(x.data(), 10, 4), TensorView::matrix(y.data(), 9, 2)), ShapeError);
  EXPECT_THROW(net->inference(TensorView::matrix(xd.data(), 10, 4), TensorView::matrix(y.data(), 10, 2)), ShapeError);
  EXPECT_THROW(net->inference(TensorView::matrix(x.data(), 10, 4, Device::CUDA), TensorView::matrix(y.data(), 10, 2)), ShapeError);
  TensorView transposed = TensorView::matrix(x.data(), 4, 10);
  std::swap(transposed.shape[0], transposed.shape[1]);
  std::swap(transposed.strides[0], transposed.strides[1]);
  EXPECT_THROW(net->inference(transposed, TensorView::matrix(y.data(), 10, 2)), ShapeError);
  std::vector<float> wrong(net->n_params() - 1);
  EXPECT_THROW(net->set_params(TensorView::vector(wrong.data(), wrong.size()), pv, TensorView{}), ShapeError);
  // Batch 0 is a valid (empty) batch.
  EXPECT_NO_THROW(net->inference(TensorView::matrix(x.data(), 0, 4), TensorView::matrix(y.data(), 0, 2)));
}

TEST(Mlp, WithoutParamsExplainsWhatToDo) {
  auto net = create_network(net_config("PortableMLP", 8, 1, "ReLU", "None"), 4, 2);
  std::vector<float> x(4), y(2);
  try {
    net->inference(TensorView::matrix(x.data(), 1, 4), TensorView::matrix(y.data(), 1, 2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_params"), std::string::npos) << e.what();
  }
}

TEST(NetworkWithInputEncoding, IdentityPadsWithOnesAndOrdersParamsNetworkFirst) {
  json enc = {{"otype", "Identity"}, {"scale", 2.0}, {"offset", 0.5}};
  auto model = create_network_with_input_encoding(3, 2, enc, net_config("FullyFusedMLP", 16, 1, "ReLU", "None"), kF64);
  EXPECT_EQ(model->input_width(), 3u);
  EXPECT_EQ(model->padded_output_width(), 16u);
  EXPECT_EQ(model->n_params(), 16u * 16 + 16 * 16);  // input padded 3 -> 16
  Pcg32 rng(3);
  for (int64_t batch : {1, 7, 256}) {
    auto r = gradcheck(*model, batch, rng);
    EXPECT_LT(r.max_input_error, 1e-6);
    EXPECT_LT(r.max_param_error, 1e-6);
  }
  auto identity = create_encoding(enc, 3, kF64);
  identity->set_alignment(8);
  std::vector<double> x = {1, 2, 3}, y(8, -1);
  identity->inference(TensorView::matrix(x.data(), 1, 3), TensorView::matrix(y.data(), 1, 8));
  EXPECT_EQ(y, (std::vector<double>{2.5, 4.5, 6.5, 1, 1, 1, 1, 1}));
}

// The Trainer's pass through an encoding with parameters (NetworkWithInputEncoding's
// forward_backward_with_loss: the encoding's forward, the network's pass asked for dL/dfeatures,
// the encoding's backward) writes what forward_with_loss then backward() write, bit for bit:
// every parameter gradient (Overwrite and Accumulate), the loss values and dL/dinput where asked
// (also with the parameter gradients ignored).
TEST(NetworkWithInputEncoding, TrainingPassEqualsForwardThenBackward) {
  const json grid = {{"otype", "HashGrid"}, {"n_levels", 4}, {"n_features_per_level", 2}, {"log2_hashmap_size", 8},
                     {"base_resolution", 4}, {"per_level_scale", 2.0}};
  auto model = create_network_with_input_encoding(2, 3, grid, net_config("PortableMLP", 16, 1, "Tanh", "None"));
  auto loss = create_loss({{"otype", "RelativeL2"}});
  const size_t n = model->n_params();
  const int64_t batch = 37;
  const uint32_t W = model->padded_output_width();
  Pcg32 rng(11);
  std::vector<float> params(n);
  model->initialize_params(rng, params.data());
  std::vector<float> x(batch * 2), target(batch * 3);
  for (auto& v : x) v = rng.next_float();
  for (auto& v : target) v = rng.next_float();
  const TensorView in = TensorView::matrix(x.data(), batch, 2), tgt = TensorView::matrix(target.data(), batch, 3);
  struct Result {
    std::vector<float> grads, values, dinput;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto pass = [&](bool one_call, GradientMode mode, bool want_dinput) {
    Result r;
    r.grads.assign(n, mode == GradientMode::Accumulate ? 0.5f : nan);
    r.values.assign(batch, nan);
    r.dinput.assign(batch * 2, nan);
    std::vector<float> out(batch * W, nan), dout(batch * W, nan);
    const TensorView p = TensorView::vector(params.data(), static_cast<int64_t>(n));
    model->set_params(p, p, TensorView::vector(r.grads.data(), static_cast<int64_t>(n)));
    const TensorView o = TensorView::matrix(out.data(), batch, W), g = TensorView::matrix(dout.data(), batch, W);
    const TensorView v = TensorView::matrix(r.values.data(), batch, 1), d = TensorView::matrix(r.dinput.data(), batch, 2);
    if (one_call) {
      model->forward_backward_with_loss(in, o, *loss, 1.0f, tgt, v, g, nullptr, mode, want_dinput ? &d : nullptr);
    } else {
      // dL/dinput needs a context prepared for it: forward() asked so, then the loss.
      std::unique_ptr<Context> ctx;
      if (want_dinput) {
        ctx = model->forward(in, &o, false, true);
        loss->evaluate(1.0f, o, tgt, v, g);
      } else {
        ctx = model->forward_with_loss(in, o, *loss, 1.0f, tgt, v, g, nullptr);
      }
      model->backward(*ctx, in, o, g, want_dinput ? &d : nullptr, false, mode);
    }
    return r;
  };
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (GradientMode mode : {GradientMode::Overwrite, GradientMode::Accumulate, GradientMode::Ignore})
    for (bool want_dinput : {false, true}) {
      if (mode == GradientMode::Ignore && !want_dinput) continue;
      SCOPED_TRACE(std::string("mode ") + std::to_string(static_cast<int>(mode)) + (want_dinput ? ", dL/dinput" : ""));
      const Result want = pass(false, mode, want_dinput), got = pass(true, mode, want_dinput);
      EXPECT_TRUE(same(got.values, want.values)) << "loss values";
      if (mode != GradientMode::Ignore) {
        EXPECT_TRUE(same(got.grads, want.grads)) << "parameter gradients";
        size_t finite = 0;
        for (float gv : got.grads) finite += std::isfinite(gv);
        EXPECT_EQ(finite, n) << "a parameter gradient was not written";
      }
      if (want_dinput) {
        EXPECT_TRUE(same(got.dinput, want.dinput)) << "dL/dinput";
        for (float dv : got.dinput) ASSERT_TRUE(std::isfinite(dv)) << "dL/dinput not written";
      }
    }
}

}  // namespace
