// Second derivatives (backward_backward_input) on the CPU: every network otype and activation,
// every encoding with an input gradient, Composite reductions and NetworkWithInputEncoding, by
// finite differences of the first derivatives in FP64 (testing::gradgradcheck); the activations'
// second derivatives against differences of their first; gradient modes, optional outputs, FP32
// against FP64, and the errors for bad arguments. (The Grid encodings' own checks are in
// test_grid_encoding.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/activation_math.h"
#include "testing/expect_error.h"
#include "testing/gradcheck.h"
#include "testing/mlp_cases.h"

using namespace tinyfuse;
using tinyfuse::testing::kF64;
using tinyfuse::testing::kMlpShapes;
using tinyfuse::testing::MlpShape;
using tinyfuse::testing::net_config;
using tinyfuse::testing::gradgradcheck;
using tinyfuse::testing::random_vector;
using tinyfuse::testing::SecondOrderOptions;
using tinyfuse::testing::SecondOrderResult;

namespace {

const std::vector<std::string> kActivations = {"None", "ReLU",    "LeakyReLU",  "SiLU",     "Exponential",
                                              "Sine", "Sigmoid", "Squareplus", "Softplus", "Tanh"};

bool piecewise_linear(const std::string& act) { return act == "None" || act == "ReLU" || act == "LeakyReLU"; }

std::string describe(const SecondOrderResult& r) {
  return "errors dL2/dg " + std::to_string(r.max_doutput_error) + ", dL2/dparams " + std::to_string(r.max_param_error) +
         ", dL2/dinput " + std::to_string(r.max_input_error);
}

void expect_accurate(const SecondOrderResult& r, const std::string& what, double tolerance = 1e-6) {
  EXPECT_LT(r.max_doutput_error, tolerance) << what << ": " << describe(r);
  EXPECT_LT(r.max_param_error, tolerance) << what << ": " << describe(r);
  EXPECT_LT(r.max_input_error, tolerance) << what << ": " << describe(r);
  EXPECT_GT(r.n_checked, 0u) << what;
}

// ---- Activations ---------------------------------------------------------------------------

TEST(ActivationMath, SecondDerivativesMatchDifferencesOfTheFirst) {
  for (const std::string& name : kActivations) {
    const Activation a = parse_activation(name, "activation");
    double largest = 0;
    for (double z = -3.05; z < 3.1; z += 0.1) {
      const double h = 1e-6;
      const double numeric = (activate_derivative(a, z + h) - activate_derivative(a, z - h)) / (2 * h);
      const double analytic = activate_second_derivative(a, z);
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << name << " at z = " << z;
      largest = std::max(largest, std::abs(analytic));
    }
    EXPECT_EQ(activation_is_piecewise_linear(a), largest == 0) << name;
    // Finite far out, where exp over- or underflows.
    for (double z : {-200.0, 200.0})
      if (a != Activation::Exponential) EXPECT_TRUE(std::isfinite(activate_second_derivative(a, z))) << name << " " << z;
  }
}

// ---- Networks ------------------------------------------------------------------------------

class MlpSecondDerivatives : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(MlpSecondDerivatives, MatchFiniteDifferencesOfTheFirst) {
  const auto& [act, batch] = GetParam();
  Pcg32 rng(4242 + batch);
  for (const MlpShape& s : kMlpShapes) {
    // Each activation as the hidden one (identity output) and as the output one (Tanh hidden).
    for (int as_output = 0; as_output < 2; ++as_output) {
      if (as_output && s.hidden == 0) continue;  // the same network as the hidden case
      const json cfg = net_config(s.otype, s.neurons, s.hidden, as_output ? "Tanh" : act, as_output ? act : "None");
      auto net = create_network(cfg, s.in, s.out, kF64);
      SecondOrderOptions o;
      o.param_scale = !as_output && act == "Exponential" ? 0.3f : 1.0f;  // see test_mlp.cpp
      const SecondOrderResult r = gradgradcheck(*net, batch, rng, o);
      const std::string what = cfg.dump() + " " + std::to_string(s.in) + " -> " + std::to_string(s.out) + " batch " +
                               std::to_string(batch);
      expect_accurate(r, what);
      EXPECT_GT(r.largest_doutput, 0) << what;
      EXPECT_GT(r.largest_param, 0) << what;
      // dL/dinput is piecewise linear in the input when every activation is: dL2/dinput is 0.
      const bool curved = as_output || (s.hidden > 0 && !piecewise_linear(act));
      if (curved) EXPECT_GT(r.largest_input, 0) << what;
      else EXPECT_EQ(r.largest_input, 0) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllActivations, MlpSecondDerivatives,
                         ::testing::Combine(::testing::ValuesIn(kActivations), ::testing::Values<int64_t>(1, 7, 200)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_batch" + std::to_string(std::get<1>(info.param));
                         });

// ---- Encodings -----------------------------------------------------------------------------

struct EncodingCase {
  json config;
  uint32_t n_in;
  uint32_t alignment;  // 0: unpadded
  double lo = -1, hi = 1.5;
  bool curved = true;  // a nonzero Hessian (dL2/dinput)
  double grid_jitter = 0;
  double h = 1e-6;  // the input step; high frequencies need a smaller one (truncation error ~ h^2 rate^4)
};

// Inputs of SphericalHarmonics and grids in [0, 1]; TriangleWave and Identity are piecewise
// linear (their dL2/dinput is 0). Smoothstep grids are cubic in the input inside a cell, with
// large third derivatives: a smaller step keeps the differences' truncation error down.
const EncodingCase kEncodingCases[] = {
    {{{"otype", "Identity"}}, 3, 0, -1, 1.5, false},
    {{{"otype", "Identity"}, {"scale", 2.5}, {"offset", -0.5}}, 3, 16, -1, 1.5, false},
    {{{"otype", "Frequency"}}, 2, 0, -1, 1.5, true, 0, 1e-8},
    {{{"otype", "Frequency"}, {"n_frequencies", 1}}, 1, 16},
    {{{"otype", "Frequency"}, {"n_frequencies", 5}}, 3, 8},
    {{{"otype", "TriangleWave"}}, 2, 0, -1, 1.5, false},
    {{{"otype", "TriangleWave"}, {"n_frequencies", 3}}, 3, 16, -1, 1.5, false},
    {{{"otype", "OneBlob"}}, 2, 0},
    {{{"otype", "OneBlob"}, {"n_bins", 4}}, 3, 16},
    {{{"otype", "OneBlob"}, {"n_bins", 64}}, 1, 0},
    {{{"otype", "SphericalHarmonics"}, {"degree", 1}}, 3, 0, 0, 1, false},  // a constant
    {{{"otype", "SphericalHarmonics"}, {"degree", 2}}, 3, 16, 0, 1, false},  // linear
    {{{"otype", "SphericalHarmonics"}, {"degree", 3}}, 3, 0, 0, 1},
    {{{"otype", "SphericalHarmonics"}}, 3, 0, 0, 1},
    {{{"otype", "SphericalHarmonics"}, {"degree", 8}}, 3, 32, 0, 1},
    {{{"otype", "Composite"},
      {"nested", {{{"otype", "Frequency"}, {"n_frequencies", 3}, {"n_dims_to_encode", 2}},
                  {{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 1}},
                  {{"otype", "Identity"}, {"scale", 2.0}}}}},
     5, 16},
    {{{"otype", "Composite"},
      {"reduction", "Sum"},
      {"nested", {{{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 2}},
                  {{"otype", "Frequency"}, {"n_frequencies", 4}, {"n_dims_to_encode", 2}}}}},
     4, 0},
    {{{"otype", "Composite"},
      {"reduction", "Product"},
      {"nested", {{{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 2}},
                  {{"otype", "Frequency"}, {"n_frequencies", 4}, {"n_dims_to_encode", 2}},
                  {{"otype", "Identity"}, {"n_dims_to_encode", 16}, {"dims_to_encode_begin", 0}}}}},
     16, 32},
    // Overlapping and unread dims: dim 1 feeds two parts, dim 3 none.
    {{{"otype", "Composite"},
      {"nested", {{{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 1}},
                  {{"otype", "SphericalHarmonics"}, {"degree", 3}, {"n_dims_to_encode", 3}, {"dims_to_encode_begin", 0}}}}},
     4, 0, 0, 1},
    {{{"otype", "NRC"}, {"n_frequencies", 4}}, 10, 16},
    // Composites with a grid part (parameters): Concatenation, Sum and Product.
    {{{"otype", "Composite"},
      {"nested", {{{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 1}},
                  {{"otype", "HashGrid"}, {"n_levels", 2}, {"n_features_per_level", 2}, {"log2_hashmap_size", 6},
                   {"base_resolution", 3}, {"interpolation", "Smoothstep"}, {"n_dims_to_encode", 2}}}}},
     3, 16, 0.05, 0.95, true, 0.5, 1e-7},
    {{{"otype", "Composite"},
      {"reduction", "Sum"},
      {"nested", {{{"otype", "DenseGrid"}, {"n_levels", 2}, {"n_features_per_level", 2}, {"base_resolution", 3},
                   {"interpolation", "Smoothstep"}, {"n_dims_to_encode", 2}},
                  {{"otype", "Frequency"}, {"n_frequencies", 1}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 0}}}}},
     2, 0, 0.05, 0.95, true, 0.5, 1e-7},
    {{{"otype", "Composite"},
      {"reduction", "Product"},
      {"nested", {{{"otype", "DenseGrid"}, {"n_levels", 2}, {"n_features_per_level", 2}, {"base_resolution", 3},
                   {"interpolation", "Smoothstep"}, {"n_dims_to_encode", 2}},
                  {{"otype", "Frequency"}, {"n_frequencies", 1}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 0}},
                  {{"otype", "HashGrid"}, {"n_levels", 2}, {"n_features_per_level", 2}, {"log2_hashmap_size", 5},
                   {"base_resolution", 2}, {"interpolation", "Smoothstep"}, {"n_dims_to_encode", 2},
                   {"dims_to_encode_begin", 0}}}}},
     2, 0, 0.05, 0.95, true, 0.5, 1e-7},
};

class EncodingSecondDerivatives : public ::testing::TestWithParam<int64_t> {};

TEST_P(EncodingSecondDerivatives, MatchFiniteDifferencesOfTheFirst) {
  const int64_t batch = GetParam();
  Pcg32 rng(77 + batch);
  for (const EncodingCase& c : kEncodingCases) {
    auto enc = create_encoding(c.config, c.n_in, kF64);
    if (c.alignment) enc->set_alignment(c.alignment);
    SecondOrderOptions o;
    o.lo = c.lo, o.hi = c.hi, o.grid_jitter = c.grid_jitter, o.h = c.h;
    const SecondOrderResult r = gradgradcheck(*enc, batch, rng, o);
    const std::string what = c.config.dump() + " batch " + std::to_string(batch);
    expect_accurate(r, what);
    if (c.config["otype"] != "SphericalHarmonics" || c.config.value("degree", 4) > 1) EXPECT_GT(r.largest_doutput, 0) << what;
    if (c.curved) EXPECT_GT(r.largest_input, 0) << what;
    else EXPECT_EQ(r.largest_input, 0) << what;
    if (enc->n_params() > 0) EXPECT_GT(r.largest_param, 0) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, EncodingSecondDerivatives, ::testing::Values(1, 7, 256),
                         [](const auto& info) { return "batch" + std::to_string(info.param); });

TEST(EncodingSecondDerivatives, EmptyHasNone) {
  Pcg32 rng(5);
  auto enc = create_encoding({{"otype", "Empty"}}, 3, kF64);
  enc->set_alignment(8);  // eight padding features
  const SecondOrderResult r = gradgradcheck(*enc, 7, rng);
  expect_accurate(r, "Empty");
  EXPECT_EQ(r.largest_doutput, 0);
  EXPECT_EQ(r.largest_input, 0);
}

// ---- NetworkWithInputEncoding --------------------------------------------------------------

struct ComposedCase {
  json encoding, network;
  uint32_t n_in, n_out;
  double lo, hi, grid_jitter;
};

const ComposedCase kComposedCases[] = {
    // The SDF shape: a 3-D hash grid (Smoothstep: its gradient is continuous across cells) into a
    // fused-semantics network with Softplus or ReLU.
    {{{"otype", "HashGrid"}, {"n_levels", 4}, {"n_features_per_level", 2}, {"log2_hashmap_size", 8},
      {"base_resolution", 3}, {"per_level_scale", 1.5}, {"interpolation", "Smoothstep"}},
     net_config("FullyFusedMLP", 16, 2, "Softplus", "None"), 3, 1, 0.05, 0.95, 0.5},
    {{{"otype", "HashGrid"}, {"n_levels", 3}, {"n_features_per_level", 4}, {"log2_hashmap_size", 7},
      {"base_resolution", 2}, {"per_level_scale", 2.0}, {"interpolation", "Linear"}},
     net_config("CutlassMLP", 16, 1, "ReLU", "None"), 3, 2, 0.05, 0.95, 0.5},
    {{{"otype", "Frequency"}, {"n_frequencies", 3}}, net_config("CutlassMLP", 8, 2, "Tanh", "Sigmoid"), 2, 3, -1, 1, 0},
    {{{"otype", "Identity"}}, net_config("PortableMLP", 8, 1, "SiLU", "Softplus"), 4, 2, -1, 1, 0},
    {{{"otype", "Composite"},
      {"nested", {{{"otype", "SphericalHarmonics"}, {"degree", 3}, {"n_dims_to_encode", 3}},
                  {{"otype", "OneBlob"}, {"n_bins", 4}}}}},
     net_config("PortableMLP", 8, 1, "Squareplus", "None"), 4, 2, 0, 1, 0},
};

class ComposedSecondDerivatives : public ::testing::TestWithParam<int64_t> {};

TEST_P(ComposedSecondDerivatives, MatchFiniteDifferencesOfTheFirst) {
  const int64_t batch = GetParam();
  Pcg32 rng(91 + batch);
  for (const ComposedCase& c : kComposedCases) {
    auto model = create_network_with_input_encoding(c.n_in, c.n_out, c.encoding, c.network, kF64);
    SecondOrderOptions o;
    o.lo = c.lo, o.hi = c.hi, o.grid_jitter = c.grid_jitter;
    const SecondOrderResult r = gradgradcheck(*model, batch, rng, o);
    const std::string what = c.encoding.dump() + " -> " + c.network.dump() + " batch " + std::to_string(batch);
    expect_accurate(r, what);
    EXPECT_GT(r.largest_doutput, 0) << what;
    EXPECT_GT(r.largest_param, 0) << what;
    EXPECT_GT(r.largest_input, 0) << what;
  }
  // A Network as tinycudann's Python builds it: an Identity padding the input with ones.
  auto padded = create_padded_network(5, 2, net_config("CutlassMLP", 16, 1, "Sine", "None"), kF64);
  ASSERT_EQ(padded->name(), "NetworkWithInputEncoding");
  expect_accurate(gradgradcheck(*padded, batch, rng), "padded CutlassMLP");
}

INSTANTIATE_TEST_SUITE_P(Batches, ComposedSecondDerivatives, ::testing::Values(1, 7, 64),
                         [](const auto& info) { return "batch" + std::to_string(info.param); });

// ---- Modes, optional outputs, precision, errors ---------------------------------------------

// An object with FP64 parameters and gradient buffers, inputs and upstream gradients.
struct Rig {
  std::unique_ptr<DifferentiableObject> object;
  std::vector<double> params, grads, x, v, g;
  int64_t batch;

  Rig(std::unique_ptr<DifferentiableObject> o, int64_t b, Pcg32& rng, double lo = 0.05, double hi = 0.95)
      : object(std::move(o)), batch(b) {
    std::vector<float> init(object->n_params());
    object->initialize_params(rng, init.data(), 1.0f);
    params.assign(init.begin(), init.end());
    for (auto& p : params) p += 0.1 * (2 * rng.next_double() - 1);
    grads.assign(params.size(), 0.0);
    auto pv = TensorView::vector(params.data(), params.size());
    object->set_params(pv, pv, TensorView::vector(grads.data(), grads.size()));
    x = random_vector(rng, batch * object->input_width(), lo, hi);
    v = random_vector(rng, batch * object->input_width());
    g = random_vector(rng, batch * object->padded_output_width());
  }
  TensorView xv() { return TensorView::matrix(x.data(), batch, object->input_width()); }
  TensorView vv() { return TensorView::matrix(v.data(), batch, object->input_width()); }
  TensorView gv() { return TensorView::matrix(g.data(), batch, object->padded_output_width()); }
  std::unique_ptr<Context> forward() { return object->forward(xv(), nullptr, false, true); }
};

std::unique_ptr<DifferentiableObject> sdf_model(const BuildOptions& options = kF64) {
  return create_network_with_input_encoding(
      3, 1,
      {{"otype", "HashGrid"}, {"n_levels", 4}, {"n_features_per_level", 2}, {"log2_hashmap_size", 10},
       {"base_resolution", 4}, {"interpolation", "Smoothstep"}},
      net_config("FullyFusedMLP", 16, 2, "Softplus", "None"), options);
}

TEST(SecondDerivatives, GradientModesAndOptionalOutputs) {
  Pcg32 rng(3);
  std::vector<std::unique_ptr<DifferentiableObject>> objects;
  objects.push_back(create_network(net_config("PortableMLP", 8, 2, "SiLU", "Tanh"), 4, 3, kF64));
  objects.push_back(sdf_model());
  for (auto& object : objects) {
    Rig r(std::move(object), 13, rng);
    const int64_t in_w = r.object->input_width(), out_w = r.object->padded_output_width();
    auto ctx = r.forward();
    std::vector<double> d_g(r.batch * out_w), d_x(r.batch * in_w);
    auto d_gv = TensorView::matrix(d_g.data(), r.batch, out_w), d_xv = TensorView::matrix(d_x.data(), r.batch, in_w);
    auto run = [&](GradientMode m, const TensorView* dg, const TensorView* dx) {
      r.object->backward_backward_input(*ctx, r.xv(), r.vv(), r.gv(), dg, dx, false, m);
    };
    run(GradientMode::Overwrite, &d_gv, &d_xv);
    const auto once = r.grads, d_g_all = d_g, d_x_all = d_x;
    run(GradientMode::Accumulate, nullptr, nullptr);
    for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(r.grads[i], 2 * once[i], 1e-12 * std::max(1.0, std::abs(once[i])));
    std::fill(r.grads.begin(), r.grads.end(), 123.0);
    // Each output alone equals the full call's, bit for bit, and Ignore leaves the gradients be.
    std::fill(d_g.begin(), d_g.end(), NAN);
    run(GradientMode::Ignore, &d_gv, nullptr);
    EXPECT_EQ(d_g, d_g_all) << r.object->name();
    std::fill(d_x.begin(), d_x.end(), NAN);
    run(GradientMode::Ignore, nullptr, &d_xv);
    EXPECT_EQ(d_x, d_x_all) << r.object->name();
    for (double e : r.grads) EXPECT_EQ(e, 123.0);
    run(GradientMode::Overwrite, nullptr, nullptr);
    EXPECT_EQ(r.grads, once) << r.object->name();
  }
}

TEST(SecondDerivatives, ReluNetworkHasNoInputHessianButParameterTerms) {
  // ReLU's act'' is 0: dL2/dinput is exactly 0 and the biases get nothing, while dL2/dW and dL2/dg
  // flow (dL/dinput = W^T diag(act') ... g is linear in each W and in g).
  Pcg32 rng(8);
  Rig r(create_network(net_config("PortableMLP", 16, 2, "ReLU", "None"), 3, 1, kF64), 50, rng, -1, 1);
  auto ctx = r.forward();
  std::vector<double> d_g(r.batch * 1, NAN), d_x(r.batch * 3, NAN);
  auto d_gv = TensorView::matrix(d_g.data(), r.batch, 1), d_xv = TensorView::matrix(d_x.data(), r.batch, 3);
  std::fill(r.grads.begin(), r.grads.end(), NAN);
  r.object->backward_backward_input(*ctx, r.xv(), r.vv(), r.gv(), &d_gv, &d_xv, false, GradientMode::Overwrite);
  for (double e : d_x) EXPECT_EQ(e, 0.0);
  double weights = 0;
  for (const ParamSegment& s : r.object->param_segments())
    for (size_t i = s.offset; i < s.offset + s.count; ++i) {
      if (s.kind == ParamSegment::Kind::Vector) EXPECT_EQ(r.grads[i], 0.0) << "bias " << i;
      else weights = std::max(weights, std::abs(r.grads[i]));
    }
  EXPECT_GT(weights, 0);
  for (double e : d_g) EXPECT_TRUE(std::isfinite(e));
}

TEST(SecondDerivatives, FloatAgreesWithDoubleReference) {
  Pcg32 rng(12);
  const int64_t batch = 300;
  for (int composed = 0; composed < 2; ++composed) {
    auto f32 = composed ? sdf_model({}) : create_network(net_config("CutlassMLP", 32, 2, "Softplus", "None"), 3, 1);
    Rig r(composed ? sdf_model() : create_network(net_config("CutlassMLP", 32, 2, "Softplus", "None"), 3, 1, kF64), batch,
          rng);
    // Both see the same values (FP32's): grids' second derivatives jump at cell faces, where a
    // rounded input could land on the other side.
    for (auto* values : {&r.params, &r.x, &r.v, &r.g})
      for (double& e : *values) e = static_cast<float>(e);
    const int64_t out_w = r.object->padded_output_width();
    auto ctx = r.forward();
    std::vector<double> d_g(batch * out_w), d_x(batch * 3);
    auto d_gv = TensorView::matrix(d_g.data(), batch, out_w), d_xv = TensorView::matrix(d_x.data(), batch, 3);
    r.object->backward_backward_input(*ctx, r.xv(), r.vv(), r.gv(), &d_gv, &d_xv, false, GradientMode::Overwrite);

    auto to_f = [](const std::vector<double>& d) { return std::vector<float>(d.begin(), d.end()); };
    std::vector<float> p = to_f(r.params), gr(p.size()), x = to_f(r.x), v = to_f(r.v), g = to_f(r.g);
    std::vector<float> fd_g(batch * out_w), fd_x(batch * 3);
    auto pv = TensorView::vector(p.data(), p.size());
    f32->set_params(pv, pv, TensorView::vector(gr.data(), gr.size()));
    auto xv = TensorView::matrix(x.data(), batch, 3);
    auto fctx = f32->forward(xv, nullptr, false, true);
    auto fd_gv = TensorView::matrix(fd_g.data(), batch, out_w), fd_xv = TensorView::matrix(fd_x.data(), batch, 3);
    f32->backward_backward_input(*fctx, xv, TensorView::matrix(v.data(), batch, 3),
                                 TensorView::matrix(g.data(), batch, out_w), &fd_gv, &fd_xv, false, GradientMode::Overwrite);
    auto compare = [&](const std::vector<float>& f, const std::vector<double>& d, const char* what) {
      double scale = 0, err = 0;
      for (double e : d) scale = std::max(scale, std::abs(e));
      for (size_t i = 0; i < d.size(); ++i) err = std::max(err, std::abs(f[i] - d[i]));
      EXPECT_GT(scale, 0) << what;
      EXPECT_LT(err, 1e-4 * std::max(1.0, scale)) << what << (composed ? " (composed)" : "");
    };
    compare(gr, r.grads, "dL2/dparams");
    compare(fd_g, d_g, "dL2/dg");
    compare(fd_x, d_x, "dL2/dinput");
  }
}

TEST(SecondDerivatives, EmptyBatch) {
  Pcg32 rng(1);
  for (int composed = 0; composed < 2; ++composed) {
    Rig r(composed ? sdf_model() : create_network(net_config("PortableMLP", 8, 1, "Tanh", "None"), 3, 1, kF64), 0, rng);
    std::fill(r.grads.begin(), r.grads.end(), NAN);
    auto ctx = r.forward();
    r.object->backward_backward_input(*ctx, r.xv(), r.vv(), r.gv(), nullptr, nullptr, false, GradientMode::Overwrite);
    for (double e : r.grads) EXPECT_EQ(e, 0.0) << "Overwrite of an empty batch writes zeros";
  }
}

template <typename E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  tinyfuse::testing::expect_error_message<E>(f, needles);
}

TEST(SecondDerivatives, BadArgumentsAreNamed) {
  Pcg32 rng(2);
  for (int composed = 0; composed < 2; ++composed) {
    Rig r(composed ? sdf_model() : create_network(net_config("CutlassMLP", 16, 1, "Tanh", "None"), 3, 1, kF64), 9, rng);
    const int64_t out_w = r.object->padded_output_width();
    auto ctx = r.forward();
    std::vector<double> wide(9 * 64), small(4 * 3);
    auto bad_cols = TensorView::matrix(wide.data(), 9, 5);
    auto bad_rows = TensorView::matrix(small.data(), 4, 3);
    auto bbi = [&](const TensorView& x, const TensorView& v, const TensorView& g, const TensorView* dg, const TensorView* dx) {
      r.object->backward_backward_input(*ctx, x, v, g, dg, dx, false, GradientMode::Overwrite);
    };
    expect_error<ShapeError>([&] { bbi(r.xv(), bad_cols, r.gv(), nullptr, nullptr); }, {"dL_ddLdinput"});
    expect_error<ShapeError>([&] { bbi(r.xv(), r.vv(), bad_cols, nullptr, nullptr); }, {"dL_doutput"});
    expect_error<ShapeError>([&] { bbi(r.xv(), r.vv(), r.gv(), &bad_cols, nullptr); }, {"dL_ddLdoutput"});
    expect_error<ShapeError>([&] { bbi(r.xv(), r.vv(), r.gv(), nullptr, &bad_cols); }, {"dL_dinput"});
    expect_error<ShapeError>([&] { bbi(bad_rows, TensorView::matrix(small.data(), 4, 3), TensorView::matrix(wide.data(), 4, out_w),
                                       nullptr, nullptr); },
                             {"differs from the forward()"});
    // A context from another object.
    auto other = create_encoding({{"otype", "Frequency"}}, 3, kF64);
    auto other_ctx = other->forward(r.xv(), nullptr, false, true);
    expect_error<Error>([&] { r.object->backward_backward_input(*other_ctx, r.xv(), r.vv(), r.gv(), nullptr, nullptr); },
                        {"backward_backward_input", "context does not come from"});
    // Parameter gradients asked for without a gradient buffer; nothing written before the refusal.
    auto pv = TensorView::vector(r.params.data(), r.params.size());
    r.object->set_params(pv, pv, TensorView{});
    std::vector<double> d_g(9 * out_w, 7.0);
    auto d_gv = TensorView::matrix(d_g.data(), 9, out_w);
    expect_error<Error>([&] { bbi(r.xv(), r.vv(), r.gv(), &d_gv, nullptr); }, {"gradient buffer"});
    for (double e : d_g) EXPECT_EQ(e, 7.0);
    r.object->backward_backward_input(*ctx, r.xv(), r.vv(), r.gv(), &d_gv, nullptr, false, GradientMode::Ignore);
  }
}

TEST(SecondDerivatives, EncodingsNameBadArgumentsAndWriteNothing) {
  const json configs[] = {
      {{"otype", "Identity"}},
      {{"otype", "Frequency"}, {"n_frequencies", 2}},
      {{"otype", "SphericalHarmonics"}, {"degree", 3}},
      {{"otype", "Composite"},
       {"reduction", "Product"},
       {"nested", {{{"otype", "OneBlob"}, {"n_bins", 2}, {"n_dims_to_encode", 3}},
                   {{"otype", "Frequency"}, {"n_frequencies", 1}, {"n_dims_to_encode", 3}, {"dims_to_encode_begin", 0}}}}},
  };
  Pcg32 rng(4);
  for (const json& cfg : configs) {
    auto enc = create_encoding(cfg, 3, kF64);
    const int64_t batch = 6, w = enc->padded_output_width();
    std::vector<double> x = random_vector(rng, batch * 3, 0, 1), v = random_vector(rng, batch * 3), g = random_vector(rng, batch * w);
    std::vector<double> d_g(batch * w, 7.0), d_x(batch * 3, 7.0), wrong(batch * (w + 3), 0.0);
    auto xv = TensorView::matrix(x.data(), batch, 3), vv = TensorView::matrix(v.data(), batch, 3);
    auto gv = TensorView::matrix(g.data(), batch, w), d_gv = TensorView::matrix(d_g.data(), batch, w);
    auto d_xv = TensorView::matrix(d_x.data(), batch, 3), bad = TensorView::matrix(wrong.data(), batch, w + 2);
    auto ctx = enc->forward(xv, nullptr, false, true);
    auto bbi = [&](const TensorView& v_, const TensorView& g_, const TensorView* dg, const TensorView* dx) {
      enc->backward_backward_input(*ctx, xv, v_, g_, dg, dx, false, GradientMode::Overwrite);
    };
    expect_error<ShapeError>([&] { bbi(bad, gv, &d_gv, &d_xv); }, {"dL_ddLdinput"});
    expect_error<ShapeError>([&] { bbi(vv, bad, &d_gv, &d_xv); }, {"dL_doutput"});
    expect_error<ShapeError>([&] { bbi(vv, gv, &bad, &d_xv); }, {"dL_ddLdoutput"});
    expect_error<ShapeError>([&] { bbi(vv, gv, &d_gv, &bad); }, {"dL_dinput"});
    for (double e : d_g) EXPECT_EQ(e, 7.0) << cfg.dump();
    for (double e : d_x) EXPECT_EQ(e, 7.0) << cfg.dump();
    bbi(vv, gv, &d_gv, &d_xv);  // and the same call with good arguments writes both
    for (double e : d_g) EXPECT_TRUE(std::isfinite(e) && e != 7.0) << cfg.dump();
  }
}

}  // namespace
