// The CPU encodings besides Grid: Frequency, TriangleWave, OneBlob, SphericalHarmonics, Empty,
// Composite and the NRC preset. Gradients by finite differences in FP64, forward values against
// hand computation and closed forms, output widths and padding as in tiny-cuda-nn, config errors,
// and tiny-cuda-nn's sample OneBlob config training on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/encodings/frequency_math.h"
#include "core/encodings/oneblob_math.h"
#include "core/encodings/triangle_wave_math.h"
#include "testing/gradcheck.h"

using namespace tinyfuse;
using tinyfuse::testing::gradcheck;
using tinyfuse::testing::random_vector;

namespace {

const BuildOptions kF64{Device::CPU, DType::F64};
constexpr double kPi = 3.14159265358979323846;

std::unique_ptr<Encoding> make64(const json& cfg, uint32_t n_in, uint32_t alignment = 0) {
  auto e = create_encoding(cfg, n_in, kF64);
  if (alignment) e->set_alignment(alignment);
  return e;
}

// The padded output of `enc` (FP64) for rows of `x`.
std::vector<double> run(Encoding& enc, std::vector<double> x) {
  const int64_t batch = static_cast<int64_t>(x.size() / enc.input_width());
  std::vector<double> y(batch * enc.padded_output_width(), NAN);
  enc.inference(TensorView::matrix(x.data(), batch, enc.input_width()),
                TensorView::matrix(y.data(), batch, enc.padded_output_width()));
  return y;
}

// dL/dx of L = sum(w * y) for the rows of x.
std::vector<double> input_grad(Encoding& enc, std::vector<double> x, std::vector<double> w) {
  const int64_t batch = static_cast<int64_t>(x.size() / enc.input_width());
  std::vector<double> y(batch * enc.padded_output_width()), dx(x.size(), NAN);
  auto xv = TensorView::matrix(x.data(), batch, enc.input_width());
  auto yv = TensorView::matrix(y.data(), batch, enc.padded_output_width());
  auto ctx = enc.forward(xv, &yv, false, true);
  auto dxv = TensorView::matrix(dx.data(), batch, enc.input_width());
  enc.backward(*ctx, xv, yv, TensorView::matrix(w.data(), batch, enc.padded_output_width()), &dxv, false,
               GradientMode::Overwrite);
  return dx;
}

// Columns [begin, begin + count) of each row of x (width `width`).
std::vector<double> columns(const std::vector<double>& x, uint32_t width, uint32_t begin, uint32_t count) {
  std::vector<double> out;
  for (size_t r = 0; r < x.size() / width; ++r)
    for (uint32_t j = 0; j < count; ++j) out.push_back(x[r * width + begin + j]);
  return out;
}

ConfigError config_error(const json& cfg, uint32_t n_in) {
  try {
    create_encoding(cfg, n_in);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError for " << cfg.dump() << " on " << n_in << " dims";
  return ConfigError("", "", "", "");
}

// ---- Gradients by finite differences (FP64) ------------------------------------------------

// testing::gradcheck's scheme (L = sum(w * y), central differences, relative error with a floor
// of 1), with two changes these encodings need: inputs drawn from [lo, hi] (SphericalHarmonics
// is a degree-7 polynomial of 2x - 1, so [-1, 1] inputs reach values where differences of the
// batch-wide sum drown in rounding), and each difference taken on the perturbed row alone
// (encodings without parameters treat rows independently), so that batch 256 is checked as
// precisely as batch 1. The analytic gradients come from one forward/backward of the batch.
double rowwise_input_gradcheck(Encoding& enc, int64_t batch, Pcg32& rng, double lo, double hi, double h,
                               size_t max_checks = 24) {
  const int64_t in_w = enc.input_width(), out_w = enc.padded_output_width(), real_w = enc.output_width();
  std::vector<double> x = random_vector(rng, batch * in_w, lo, hi);
  std::vector<double> w = random_vector(rng, batch * out_w);
  // Real features only (for SphericalHarmonics, padding sits in front: its last features then
  // go unchecked here, and the padding tests cover its layout).
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = real_w; j < out_w; ++j) w[b * out_w + j] = 0;
  const std::vector<double> dx = input_grad(enc, x, w);
  std::vector<double> row_out(out_w);
  auto row_loss = [&](int64_t b) {
    enc.inference(TensorView::matrix(x.data() + b * in_w, 1, in_w), TensorView::matrix(row_out.data(), 1, out_w));
    double s = 0;
    for (int64_t j = 0; j < out_w; ++j) s += w[b * out_w + j] * row_out[j];
    return s;
  };
  double max_err = 0;
  const size_t n = x.size();
  for (size_t c = 0; c < std::min(n, max_checks); ++c) {
    const size_t i = n <= max_checks ? c : rng.next_uint() % n;
    const int64_t b = static_cast<int64_t>(i) / in_w;
    const double saved = x[i];
    x[i] = saved + h;
    const double up = row_loss(b);
    x[i] = saved - h;
    const double down = row_loss(b);
    x[i] = saved;
    max_err = std::max(max_err, tinyfuse::testing::grad_error(dx[i], (up - down) / (2 * h)));
  }
  return max_err;
}

struct GradCase {
  json config;
  uint32_t n_in;
  uint32_t alignment;  // 0: unpadded
  double h;            // finite-difference step
  double lo = -1, hi = 1.5;  // input range
};

// Piecewise-linear encodings (TriangleWave) are differenced with a tiny step so that a kink
// almost never falls inside [x - h, x + h]; their difference quotients are exact elsewhere.
// Spherical harmonics read [0, 1] (directions in [-1, 1]^3).
const GradCase kGradCases[] = {
    {{{"otype", "Frequency"}}, 2, 0, 1e-7},
    {{{"otype", "Frequency"}, {"n_frequencies", 1}}, 1, 16, 1e-6},
    {{{"otype", "Frequency"}, {"n_frequencies", 5}}, 3, 8, 1e-6},
    {{{"otype", "TriangleWave"}}, 2, 0, 1e-9},
    {{{"otype", "TriangleWave"}, {"n_frequencies", 3}}, 3, 16, 1e-9},
    {{{"otype", "OneBlob"}}, 2, 0, 1e-6},
    {{{"otype", "OneBlob"}, {"n_bins", 4}}, 3, 16, 1e-6},
    {{{"otype", "OneBlob"}, {"n_bins", 64}}, 1, 0, 1e-7},
    {{{"otype", "SphericalHarmonics"}, {"degree", 1}}, 3, 0, 1e-6, 0, 1},
    {{{"otype", "SphericalHarmonics"}, {"degree", 2}}, 3, 16, 1e-6, 0, 1},
    {{{"otype", "SphericalHarmonics"}}, 3, 0, 1e-6, 0, 1},
    {{{"otype", "SphericalHarmonics"}, {"degree", 8}}, 3, 0, 1e-6, 0, 1},
    {{{"otype", "Empty"}}, 3, 0, 1e-6},
    {{{"otype", "Composite"},
      {"nested", {{{"otype", "Frequency"}, {"n_frequencies", 3}, {"n_dims_to_encode", 2}},
                  {{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 1}},
                  {{"otype", "Identity"}, {"scale", 2.0}}}}},
     5, 16, 1e-7},
    {{{"otype", "Composite"},
      {"nested", {{{"otype", "SphericalHarmonics"}, {"degree", 3}, {"n_dims_to_encode", 3}},
                  {{"otype", "Frequency"}, {"n_frequencies", 2}}}}},
     4, 32, 1e-6, 0, 1},
    {{{"otype", "Composite"},
      {"reduction", "Sum"},
      {"nested", {{{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 2}},
                  {{"otype", "Frequency"}, {"n_frequencies", 4}, {"n_dims_to_encode", 2}}}}},
     4, 0, 1e-6},
    {{{"otype", "Composite"},
      {"reduction", "Product"},
      {"nested", {{{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 2}},
                  {{"otype", "Frequency"}, {"n_frequencies", 4}, {"n_dims_to_encode", 2}},
                  {{"otype", "Identity"}, {"n_dims_to_encode", 16}, {"dims_to_encode_begin", 0}}}}},
     16, 32, 1e-6},
    // Overlapping and unread dims: dim 1 feeds two parts, dim 3 none.
    {{{"otype", "Composite"},
      {"nested", {{{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 1}},
                  {{"otype", "SphericalHarmonics"}, {"degree", 2}, {"n_dims_to_encode", 3}, {"dims_to_encode_begin", 0}}}}},
     4, 0, 1e-6, 0, 1},
    {{{"otype", "NRC"}, {"n_frequencies", 4}}, 10, 16, 1e-9},
};

class EncodingGradients : public ::testing::TestWithParam<int64_t> {};

TEST_P(EncodingGradients, MatchFiniteDifferences) {
  const int64_t batch = GetParam();
  Pcg32 rng(17 + batch);
  for (const GradCase& c : kGradCases) {
    auto enc = make64(c.config, c.n_in, c.alignment);
    ASSERT_EQ(enc->n_params(), 0u);
    EXPECT_LT(rowwise_input_gradcheck(*enc, batch, rng, c.lo, c.hi, c.h), 1e-6) << c.config.dump() << " batch " << batch;
    // The shared checker (batch-wide sums) agrees on batches small enough for its rounding.
    if (batch <= 7 && c.lo == -1) {
      auto r = gradcheck(*enc, batch, rng, 1.0f, 24, c.h);
      EXPECT_LT(r.max_input_error, 1e-6) << c.config.dump() << " batch " << batch << " (gradcheck)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, EncodingGradients, ::testing::Values(1, 7, 256),
                         [](const auto& info) { return "batch" + std::to_string(info.param); });

// A Composite nesting a HashGrid (parameters) next to a parameter-free part; inputs stay in
// [0, 1] (the grid's domain) and away from grid cell faces is not needed at this step size.
TEST(CompositeEncoding, NestedGridParameterAndInputGradients) {
  const json cfg = {{"otype", "Composite"},
                    {"nested", {{{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 1}},
                                {{"otype", "HashGrid"}, {"n_levels", 2}, {"n_features_per_level", 2},
                                 {"log2_hashmap_size", 6}, {"base_resolution", 3}, {"n_dims_to_encode", 2}}}}};
  for (int64_t batch : {1, 7, 256}) {
    auto enc = make64(cfg, 3, 16);
    ASSERT_GT(enc->n_params(), 0u);
    // Parameters: the grid's, at offset 0 of the composite's buffer.
    auto segs = enc->param_segments();
    ASSERT_FALSE(segs.empty());
    EXPECT_EQ(segs[0].offset, 0u);
    EXPECT_EQ(segs[0].kind, ParamSegment::Kind::Grid);

    Pcg32 rng(99 + batch);
    const int64_t in_w = 3, out_w = enc->padded_output_width();
    std::vector<double> x = random_vector(rng, batch * in_w, 0.05, 0.95);
    std::vector<float> init(enc->n_params());
    enc->initialize_params(rng, init.data(), 1.0f);
    std::vector<double> params(init.begin(), init.end()), grads(enc->n_params(), 0.0);
    for (auto& p : params) p += 0.1 * (2 * rng.next_double() - 1);  // make the features matter
    auto pv = TensorView::vector(params.data(), params.size());
    enc->set_params(pv, pv, TensorView::vector(grads.data(), grads.size()));
    std::vector<double> w = random_vector(rng, batch * out_w);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = enc->output_width(); j < out_w; ++j) w[b * out_w + j] = 0;
    auto loss = [&] {
      auto y = run(*enc, x);
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
      return s;
    };
    const auto dx = input_grad(*enc, x, w);
    const double h = 1e-7;
    auto numeric = [&](double& v) {
      const double saved = v;
      v = saved + h;
      const double up = loss();
      v = saved - h;
      const double down = loss();
      v = saved;
      return (up - down) / (2 * h);
    };
    auto err = [](double a, double n) { return std::abs(a - n) / std::max(1.0, std::abs(n)); };
    double max_in = 0, max_param = 0;
    for (int i = 0; i < 12; ++i) {
      const size_t k = rng.next_uint() % x.size();
      max_in = std::max(max_in, err(dx[k], numeric(x[k])));
    }
    for (int i = 0; i < 24; ++i) {
      const size_t k = rng.next_uint() % params.size();
      max_param = std::max(max_param, err(grads[k], numeric(params[k])));
    }
    EXPECT_LT(max_in, 1e-6) << "batch " << batch;
    EXPECT_LT(max_param, 1e-6) << "batch " << batch;
  }
}

// As in tiny-cuda-nn, a part is padded so that a following grid starts at a multiple of its
// n_features_per_level, and a grid that comes last takes the composite's padding itself.
TEST(CompositeEncoding, GridPartsAlignAndPadThemselves) {
  const json grid = {{"otype", "HashGrid"}, {"n_levels", 2}, {"n_features_per_level", 2}, {"log2_hashmap_size", 6},
                     {"base_resolution", 3}};
  json nested_grid = grid;
  nested_grid["n_dims_to_encode"] = 2;
  auto enc = make64({{"otype", "Composite"},
                     {"nested", {{{"otype", "TriangleWave"}, {"n_frequencies", 3}, {"n_dims_to_encode", 1}}, nested_grid}}},
                    3);
  EXPECT_EQ(enc->output_width(), 4u + 4);  // 3 waves, 1 padding, 2 levels x 2 features
  enc->set_alignment(16);
  ASSERT_EQ(enc->padded_output_width(), 16u);
  auto alone = make64(grid, 2, 12);
  ASSERT_EQ(alone->padded_output_width(), 12u);
  ASSERT_EQ(alone->n_params(), enc->n_params());
  Pcg32 rng(31);
  std::vector<double> params = random_vector(rng, enc->n_params());
  auto pv = TensorView::vector(params.data(), params.size());
  enc->set_params(pv, pv, TensorView{});
  alone->set_params(pv, pv, TensorView{});
  const auto x = random_vector(rng, 5 * 3, 0, 1);
  const auto y = run(*enc, x);
  EXPECT_EQ(columns(y, 16, 0, 3), run(*make64({{"otype", "TriangleWave"}, {"n_frequencies", 3}}, 1), columns(x, 3, 0, 1)));
  for (double v : columns(y, 16, 3, 1)) EXPECT_EQ(v, 1.0);
  EXPECT_EQ(columns(y, 16, 4, 12), run(*alone, columns(x, 3, 1, 2)));
}

// ---- Forward values -----------------------------------------------------------------------

TEST(FrequencyEncoding, ForwardMatchesHandComputation) {
  auto enc = make64({{"otype", "Frequency"}, {"n_frequencies", 3}}, 2);
  ASSERT_EQ(enc->output_width(), 12u);
  const auto y = run(*enc, {0.25, -1.0 / 3});
  // Per dim: sin(pi x), cos(pi x), sin(2 pi x), cos(2 pi x), sin(4 pi x), cos(4 pi x).
  const double s = std::sqrt(0.5);
  const double expected_x[] = {s, s, 1, 0, 0, -1};
  for (int j = 0; j < 6; ++j) EXPECT_NEAR(y[j], expected_x[j], 1e-15) << j;
  for (int k = 0; k < 3; ++k) {
    const double phase = std::ldexp(-1.0 / 3, k) * kPi;
    EXPECT_NEAR(y[6 + 2 * k], std::sin(phase), 1e-15);
    EXPECT_NEAR(y[6 + 2 * k + 1], std::cos(phase), 1e-15);
  }
  EXPECT_EQ(enc->hyperparams(), json({{"otype", "Frequency"}, {"n_frequencies", 3}}));
  EXPECT_EQ(make64({{"otype", "Frequency"}}, 3)->output_width(), 72u);  // default 12 frequencies
}

TEST(TriangleWaveEncoding, ForwardMatchesHandComputation) {
  auto enc = make64({{"otype", "TriangleWave"}, {"n_frequencies", 3}}, 1);
  ASSERT_EQ(enc->output_width(), 3u);
  // k = 0: v = x/2 = 0.125 -> 4|0.125 - 0.5| - 1 = 0.5; k = 1: v = x + 0.25 = 0.5 -> -1;
  // k = 2: v = 2x + 0.5 = 1 -> 1.
  auto y = run(*enc, {0.25});
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  EXPECT_DOUBLE_EQ(y[1], -1.0);
  EXPECT_DOUBLE_EQ(y[2], 1.0);
  // Slopes: -2^(k+1) on falling halves, +2^(k+1) on rising ones. At x = 0.1: v = 0.05 (falling),
  // 0.35 (falling), 0.7 (rising).
  auto dx = input_grad(*enc, {0.1}, {1, 0, 0});
  EXPECT_DOUBLE_EQ(dx[0], -2.0);
  dx = input_grad(*enc, {0.1}, {0, 1, 0});
  EXPECT_DOUBLE_EQ(dx[0], -4.0);
  dx = input_grad(*enc, {0.1}, {0, 0, 1});
  EXPECT_DOUBLE_EQ(dx[0], 8.0);
  EXPECT_EQ(make64({{"otype", "TriangleWave"}}, 3)->output_width(), 36u);  // default 12
}

TEST(OneBlobEncoding, ForwardMatchesQuarticKernel) {
  auto enc = make64({{"otype", "OneBlob"}, {"n_bins", 4}}, 1);
  ASSERT_EQ(enc->output_width(), 4u);
  // Centred on a bin boundary: half the kernel on each side.
  auto y = run(*enc, {0.5});
  EXPECT_NEAR(y[0], 0.0, 1e-15);
  EXPECT_NEAR(y[1], 0.5, 1e-15);
  EXPECT_NEAR(y[2], 0.5, 1e-15);
  EXPECT_NEAR(y[3], 0.0, 1e-15);
  // Centred in bin 1 (radius 1/4 = two half bins): the middle holds cdf(u=1/2) - cdf(u=-1/2)
  // of the quartic cdf 15/16 u (1 - 2/3 u^2 + 1/5 u^4) + 1/2.
  const double u = 0.5, mid = 2 * (15.0 / 16 * u * (1 - 2.0 / 3 * u * u + 0.2 * u * u * u * u));
  y = run(*enc, {0.375});
  EXPECT_NEAR(y[1], mid, 1e-15);
  EXPECT_NEAR(y[0], (1 - mid) / 2, 1e-15);
  EXPECT_NEAR(y[2], (1 - mid) / 2, 1e-15);
  EXPECT_NEAR(y[3], 0.0, 1e-15);
  // The domain wraps: at x = 0 the blob is split between the first and the last bin.
  y = run(*enc, {0.0});
  EXPECT_NEAR(y[0], 0.5, 1e-15);
  EXPECT_NEAR(y[3], 0.5, 1e-15);
  // Features of an input in [0, 1] sum to one.
  auto enc16 = make64({{"otype", "OneBlob"}}, 1);
  ASSERT_EQ(enc16->output_width(), 16u);  // default 16 bins
  Pcg32 rng(3);
  for (int i = 0; i < 20; ++i) {
    y = run(*enc16, {rng.next_double()});
    double sum = 0;
    for (double v : y) {
      EXPECT_GE(v, -1e-15);
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  // Default otype is OneBlob, as in tiny-cuda-nn.
  EXPECT_EQ(create_encoding(json::object(), 2)->hyperparams(), json({{"otype", "OneBlob"}, {"n_bins", 16}}));
}

// The CPU encoder computes each bin boundary once in a vectorised pass: the same bits as the
// scalar definition (oneblob_math.h's oneblob_encode), for FP32 and FP64, bins 1 to 1024,
// inputs inside and outside [0, 1].
TEST(OneBlobEncoding, CpuFeaturesAreBitwiseTheScalarDefinition) {
  Pcg32 rng(17);
  for (const uint32_t bins : {1u, 2u, 16u, 64u, 1024u}) {
    std::vector<float> xs = {0.0f, 1.0f, 0.5f, -0.25f, 1.75f, 1e-7f};
    for (int i = 0; i < 40; ++i) xs.push_back(rng.uniform(-0.5f, 1.5f));
    const int64_t n = static_cast<int64_t>(xs.size());
    auto enc = create_encoding({{"otype", "OneBlob"}, {"n_bins", bins}}, 1);
    std::vector<float> out(n * enc->padded_output_width(), NAN);
    enc->inference(TensorView::matrix(xs.data(), n, 1), TensorView::matrix(out.data(), n, enc->padded_output_width()));
    auto enc64 = make64({{"otype", "OneBlob"}, {"n_bins", bins}}, 1);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> expect(bins);
      oneblob_encode(bins, xs[i], expect.data());
      ASSERT_EQ(0, std::memcmp(expect.data(), out.data() + i * enc->padded_output_width(), bins * sizeof(float)))
          << bins << " bins, x " << xs[i];
      std::vector<double> expect64(bins);
      oneblob_encode(bins, double(xs[i]), expect64.data());
      const std::vector<double> got64 = run(*enc64, {double(xs[i])});
      ASSERT_EQ(0, std::memcmp(expect64.data(), got64.data(), bins * sizeof(double))) << bins << " bins FP64";
    }
  }
}

// The windows the fused OneBlob inference kernel evaluates (fused/hopper/oneblob_stage.cuh): for
// x in [0, 1] and 8 or more bins, each window's eight boundaries through oneblob_window_cdf (one
// quartic term) have oneblob_wrapped_cdf's bits (three terms), and every feature outside the two
// windows is exactly +0 in the scalar definition, so zeros plus the windows' features are the
// features. Bin counts powers of two (the config's rule: boundaries by multiplication) and not
// (oneblob_boundary's division, for completeness).
TEST(OneBlobEncoding, FusedWindowsAreTheWrappedCdfBitForBit) {
  Pcg32 rng(29);
  for (const uint32_t bins : {8u, 16u, 24u, 40u, 64u, 128u, 256u}) {
    SCOPED_TRACE(std::to_string(bins) + " bins");
    const float n = static_cast<float>(bins), inv = oneblob_inv_bins(bins);
    EXPECT_EQ(inv != 0.0f, (bins & (bins - 1)) == 0);
    std::vector<float> xs = {0.0f, 1.0f, 0.5f, std::nextafter(0.5f, 0.0f), 1e-7f, 1.0f - 6e-8f};
    for (uint32_t k = 0; k <= bins; ++k)
      for (float d : {0.0f, 1e-6f, -1e-6f, 0.5f / n})
        if (k / n + d >= 0.0f && k / n + d <= 1.0f) xs.push_back(k / n + d);
    for (int i = 0; i < 2000; ++i) xs.push_back(rng.uniform(0.0f, 1.0f));
    for (const float x : xs) {
      std::vector<bool> in_window(bins, false);
      for (int w = 0; w < 2; ++w) {
        const int copy = w == 0 ? 0 : (x < 0.5f ? 1 : -1);
        const float centre = (w == 0 ? x : (x < 0.5f ? x + 1.0f : x - 1.0f)) * n;
        const int first = static_cast<int>(std::floor(centre)) - 3;
        for (int k = first; k <= first + 7; ++k) {
          const float want = oneblob_wrapped_cdf(oneblob_boundary(k, n, inv), x, n);
          const float got = oneblob_window_cdf(k, x, n, inv, copy);
          ASSERT_EQ(0, std::memcmp(&want, &got, sizeof(float))) << "x " << x << " boundary " << k << " copy " << copy;
          if (k < first + 7 && k >= 0 && k < static_cast<int>(bins)) in_window[static_cast<size_t>(k)] = true;
        }
      }
      std::vector<float> features(bins);
      oneblob_encode(bins, x, features.data());
      for (uint32_t k = 0; k < bins; ++k)
        if (!in_window[k]) {
          ASSERT_EQ(features[k], 0.0f) << "x " << x << " bin " << k;
          ASSERT_FALSE(std::signbit(features[k])) << "x " << x << " bin " << k;
        }
    }
  }
}

// The FP32 Frequency encoder's own vectorised sin and cos (cpu/encodings/frequency.cpp): within a
// few ulp of FP64 for inputs whose phases it reduces, the library's sin and cos beyond them, NaN
// for NaN and Inf; its input gradient likewise.
TEST(FrequencyEncoding, Fp32SinAndCosAreWithinAFewUlpOfFp64) {
  const uint32_t F = 12;
  std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 0.25f, 1e-30f, 1.2f, 1000.0f, -3e5f, INFINITY, NAN};
  Pcg32 rng(8);
  for (int i = 0; i < 500; ++i) xs.push_back(rng.uniform(-1.25f, 1.25f));
  const int64_t n = static_cast<int64_t>(xs.size());
  auto enc = create_encoding({{"otype", "Frequency"}, {"n_frequencies", F}}, 1);
  const uint32_t w = enc->padded_output_width();
  std::vector<float> out(n * w), g(n * w), dx(n);
  for (auto& v : g) v = rng.uniform(-1.0f, 1.0f);
  const TensorView xv = TensorView::matrix(xs.data(), n, 1);
  enc->inference(xv, TensorView::matrix(out.data(), n, w));
  auto ctx = enc->forward(xv, nullptr, false, true);
  const TensorView dxv = TensorView::matrix(dx.data(), n, 1);
  enc->backward(*ctx, xv, TensorView{}, TensorView::matrix(g.data(), n, w), &dxv, false, GradientMode::Ignore);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> ref(2 * F), gd(g.begin() + i * w, g.begin() + i * w + 2 * F);
    frequency_encode(F, double(xs[i]), ref.data());
    const double dref = frequency_backward(F, double(xs[i]), gd.data());
    if (!std::isfinite(xs[i])) {
      for (uint32_t j = 0; j < 2 * F; ++j) EXPECT_TRUE(std::isnan(out[i * w + j])) << xs[i];
      continue;
    }
    // The phase itself is FP32 (pi rounded, then the product: relative 9e-8 of up to 2^11 pi):
    // the features can move by that much; the rest is the sin and cos.
    double scale = 0;
    for (uint32_t k = 0; k < F; ++k) {
      const double phase_error = std::abs(std::ldexp(double(xs[i]), k) * 3.14159265358979) * 1.2e-7;
      for (uint32_t j : {2 * k, 2 * k + 1})
        ASSERT_NEAR(out[i * w + j], ref[j], phase_error + 3e-7) << "x " << xs[i] << " feature " << j;
      scale += std::ldexp(3.2, k) * (std::abs(gd[2 * k]) + std::abs(gd[2 * k + 1])) * (phase_error + 3e-7);
    }
    EXPECT_NEAR(dx[i], dref, scale + 1e-6 * std::abs(dref)) << "x " << xs[i];
  }
}

// The CPU's TriangleWave row loops (vectorised) give the scalar definition's bits
// (triangle_wave_math.h), forward and input gradient, FP32 and FP64.
template <typename T>
void check_triangle_wave_rows() {
  const uint32_t F = 12, D = 3;
  Pcg32 rng(5);
  const int64_t n = 300;
  std::vector<T> x(n * D), g(n * D * F), y(n * D * F), dx(n * D);
  for (auto& v : x) v = T(rng.uniform(-1.5f, 2.5f));
  x[0] = T(0), x[1] = T(0.5), x[2] = -T(0);
  for (auto& v : g) v = T(rng.uniform(-1.0f, 1.0f));
  BuildOptions o;
  o.cpu_precision = std::is_same_v<T, double> ? DType::F64 : DType::F32;
  auto enc = create_encoding({{"otype", "TriangleWave"}, {"n_frequencies", F}}, D, o);
  const TensorView xv = TensorView::matrix(x.data(), n, D);
  enc->inference(xv, TensorView::matrix(y.data(), n, D * F));
  auto ctx = enc->forward(xv, nullptr, false, true);
  const TensorView dxv = TensorView::matrix(dx.data(), n, D);
  enc->backward(*ctx, xv, TensorView{}, TensorView::matrix(g.data(), n, D * F), &dxv, false, GradientMode::Ignore);
  for (int64_t i = 0; i < n * D; ++i) {
    T expect[F];
    triangle_wave_encode(F, x[i], expect);
    ASSERT_EQ(0, std::memcmp(expect, y.data() + i * F, sizeof expect)) << "x " << double(x[i]);
    const T dexpect = triangle_wave_backward(F, x[i], g.data() + i * F);
    ASSERT_EQ(0, std::memcmp(&dexpect, &dx[i], sizeof(T))) << "x " << double(x[i]);
  }
}

TEST(TriangleWaveEncoding, CpuRowsAreBitwiseTheScalarDefinition) {
  check_triangle_wave_rows<float>();
  check_triangle_wave_rows<double>();
}

// Direction d (unit) -> the encoding's input (d + 1) / 2.
std::vector<double> sh_input(double x, double y, double z) { return {(x + 1) / 2, (y + 1) / 2, (z + 1) / 2}; }

TEST(SphericalHarmonicsEncoding, Degree2MatchesClosedFormRealHarmonics) {
  auto enc = make64({{"otype", "SphericalHarmonics"}, {"degree", 2}}, 3);
  ASSERT_EQ(enc->output_width(), 4u);
  auto enc3 = make64({{"otype", "SphericalHarmonics"}, {"degree", 3}}, 3);
  ASSERT_EQ(enc3->output_width(), 9u);
  const double x = 0.48, y = 0.6, z = 0.64;  // a unit vector
  const auto v = run(*enc3, sh_input(x, y, z));
  const double c0 = 0.5 / std::sqrt(kPi), c1 = std::sqrt(3 / (4 * kPi)), c2 = 0.5 * std::sqrt(15 / kPi);
  // tiny-cuda-nn's order (l, m = -l..l) and signs (Condon-Shortley phase).
  const double expected[] = {c0,
                             -c1 * y,
                             c1 * z,
                             -c1 * x,
                             c2 * x * y,
                             -c2 * y * z,
                             0.25 * std::sqrt(5 / kPi) * (3 * z * z - 1),
                             -c2 * x * z,
                             0.5 * c2 * (x * x - y * y)};
  for (int j = 0; j < 9; ++j) EXPECT_NEAR(v[j], expected[j], 1e-14) << j;
  const auto v2 = run(*enc, sh_input(x, y, z));
  for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(v2[j], v[j]);
  // Degree 4 (the default): Y_3^0 = sqrt(7)/(4 sqrt(pi)) z (5z^2 - 3).
  auto enc4 = make64({{"otype", "SphericalHarmonics"}}, 3);
  ASSERT_EQ(enc4->output_width(), 16u);
  EXPECT_NEAR(run(*enc4, sh_input(x, y, z))[12], std::sqrt(7.0) / (4 * std::sqrt(kPi)) * z * (5 * z * z - 3), 1e-14);
  // Off the sphere the polynomial is evaluated as is (tiny-cuda-nn does not normalise):
  // the input 0.5 everywhere is the zero vector.
  const auto zero = run(*enc3, {0.5, 0.5, 0.5});
  EXPECT_NEAR(zero[6], -0.25 * std::sqrt(5 / kPi), 1e-15);
  EXPECT_NEAR(zero[1], 0.0, 1e-15);
}

// The degree-8 harmonics are orthonormal on the sphere: Gauss-Legendre in z times uniform
// azimuths integrates their products (polynomials of degree <= 14) exactly.
TEST(SphericalHarmonicsEncoding, Degree8IsOrthonormal) {
  auto enc = make64({{"otype", "SphericalHarmonics"}, {"degree", 8}}, 3);
  ASSERT_EQ(enc->output_width(), 64u);
  const int n_z = 12, n_phi = 24;
  std::vector<double> nodes, weights;
  for (int i = 0; i < n_z; ++i) {  // Newton on the Legendre polynomial P_n
    double t = std::cos(kPi * (i + 0.75) / (n_z + 0.5)), dp = 0;
    for (int it = 0; it < 100; ++it) {
      double p0 = 1, p1 = t;
      for (int k = 2; k <= n_z; ++k) {
        const double p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k;
        p0 = p1;
        p1 = p2;
      }
      dp = n_z * (t * p1 - p0) / (t * t - 1);
      const double step = p1 / dp;
      t -= step;
      if (std::abs(step) < 1e-16) break;
    }
    nodes.push_back(t);
    weights.push_back(2 / ((1 - t * t) * dp * dp));
  }
  std::vector<double> x, w;
  for (int i = 0; i < n_z; ++i)
    for (int j = 0; j < n_phi; ++j) {
      const double z = nodes[i], r = std::sqrt(1 - z * z), phi = 2 * kPi * j / n_phi;
      for (double c : sh_input(r * std::cos(phi), r * std::sin(phi), z)) x.push_back(c);
      w.push_back(weights[i] * 2 * kPi / n_phi);
    }
  const auto y = run(*enc, x);
  double max_err = 0;
  for (int a = 0; a < 64; ++a)
    for (int b = 0; b < 64; ++b) {
      double s = 0;
      for (size_t p = 0; p < w.size(); ++p) s += w[p] * y[p * 64 + a] * y[p * 64 + b];
      max_err = std::max(max_err, std::abs(s - (a == b ? 1.0 : 0.0)));
    }
  EXPECT_LT(max_err, 1e-12);
}

TEST(EmptyEncoding, NoOutputsAndZeroInputGradients) {
  auto enc = make64({{"otype", "Empty"}}, 3);
  EXPECT_EQ(enc->output_width(), 0u);
  EXPECT_EQ(enc->padded_output_width(), 0u);
  enc->set_alignment(16);
  EXPECT_EQ(enc->padded_output_width(), 0u);  // nothing to align
  auto dx = input_grad(*enc, {0.1, 0.2, 0.3}, {});
  for (double v : dx) EXPECT_EQ(v, 0.0);
}

TEST(Encodings, FloatAgreesWithDoubleReference) {
  const json configs[] = {{{"otype", "Frequency"}, {"n_frequencies", 6}},
                          {{"otype", "TriangleWave"}, {"n_frequencies", 6}},
                          {{"otype", "OneBlob"}, {"n_bins", 32}},
                          {{"otype", "SphericalHarmonics"}, {"degree", 8}},
                          {{"otype", "NRC"}, {"n_frequencies", 6}}};
  Pcg32 rng(5);
  for (const json& cfg : configs) {
    const uint32_t n_in = cfg["otype"] == "NRC" ? 9 : 3;
    auto f32 = create_encoding(cfg, n_in);
    auto f64 = create_encoding(cfg, n_in, kF64);
    f32->set_alignment(16);
    f64->set_alignment(16);
    const int64_t batch = 100, w = f64->padded_output_width();
    auto xd = random_vector(rng, batch * n_in, 0, 1);
    std::vector<float> xf(xd.begin(), xd.end());
    xd.assign(xf.begin(), xf.end());  // the same inputs in both
    std::vector<float> yf(batch * w, NAN);
    f32->inference(TensorView::matrix(xf.data(), batch, n_in), TensorView::matrix(yf.data(), batch, w));
    const auto yd = run(*f64, xd);
    double max_err = 0;
    for (size_t i = 0; i < yd.size(); ++i) {
      ASSERT_TRUE(std::isfinite(yf[i])) << cfg.dump() << " element " << i << " not written";
      max_err = std::max(max_err, std::abs(yf[i] - yd[i]) / std::max(1.0, std::abs(yd[i])));
    }
    EXPECT_LT(max_err, 1e-4) << cfg.dump();
  }
}

// ---- Output widths and padding ------------------------------------------------------------

TEST(Encodings, AlignmentPadsWithOnesAfterFeatures) {
  const json configs[] = {{{"otype", "Frequency"}, {"n_frequencies", 2}},  // 12 of 16
                          {{"otype", "TriangleWave"}, {"n_frequencies", 3}},  // 9 of 16
                          {{"otype", "OneBlob"}, {"n_bins", 4}}};             // 12 of 16
  Pcg32 rng(8);
  for (const json& cfg : configs) {
    auto plain = make64(cfg, 3), padded = make64(cfg, 3, 16);
    const uint32_t n = plain->output_width();
    EXPECT_EQ(plain->padded_output_width(), n);
    EXPECT_EQ(padded->output_width(), n);
    ASSERT_EQ(padded->padded_output_width(), 16u) << cfg.dump();
    const auto x = random_vector(rng, 5 * 3, 0, 1);
    const auto a = run(*plain, x), b = run(*padded, x);
    for (int r = 0; r < 5; ++r)
      for (uint32_t j = 0; j < 16; ++j)
        EXPECT_EQ(b[r * 16 + j], j < n ? a[r * n + j] : 1.0) << cfg.dump() << " row " << r << " col " << j;
    // Gradients flowing into padding columns are ignored.
    std::vector<double> w(5 * 16, 0.0), w_pad(5 * 16, 0.0), w_plain(5 * n);
    for (int r = 0; r < 5; ++r)
      for (uint32_t j = 0; j < 16; ++j) {
        const double v = std::sin(1.0 + r * 16 + j);
        if (j < n) w[r * 16 + j] = w_pad[r * 16 + j] = w_plain[r * n + j] = v;
        else w_pad[r * 16 + j] = 100.0;
      }
    EXPECT_EQ(input_grad(*padded, x, w), input_grad(*padded, x, w_pad));
    EXPECT_EQ(input_grad(*padded, x, w), input_grad(*plain, x, w_plain));
  }
}

TEST(SphericalHarmonicsEncoding, PaddingGoesInFrontAsInTcnn) {
  auto plain = make64({{"otype", "SphericalHarmonics"}, {"degree", 3}}, 3);
  auto padded = make64({{"otype", "SphericalHarmonics"}, {"degree", 3}}, 3, 16);
  ASSERT_EQ(padded->padded_output_width(), 16u);
  EXPECT_EQ(padded->output_width(), 9u);
  const std::vector<double> x = {0.1, 0.7, 0.4};
  const auto a = run(*plain, x), b = run(*padded, x);
  for (int j = 0; j < 7; ++j) EXPECT_EQ(b[j], 1.0);
  for (int j = 0; j < 9; ++j) EXPECT_EQ(b[7 + j], a[j]);
  std::vector<double> w(16), w_plain(9);
  for (int j = 0; j < 9; ++j) w[7 + j] = w_plain[j] = 0.3 * j - 1;
  EXPECT_EQ(input_grad(*padded, x, w), input_grad(*plain, x, w_plain));
  // Degree 4 fills 16 columns exactly.
  EXPECT_EQ(make64({{"otype", "SphericalHarmonics"}}, 3, 16)->padded_output_width(), 16u);
}

// ---- Composite ----------------------------------------------------------------------------

TEST(CompositeEncoding, ConcatenatesNestedEncodingsOnTheirDims) {
  const json freq = {{"otype", "Frequency"}, {"n_frequencies", 3}};
  const json blob = {{"otype", "OneBlob"}, {"n_bins", 8}};
  json f = freq, b = blob;
  f["n_dims_to_encode"] = 2;
  b["n_dims_to_encode"] = 1;
  // The entry without n_dims_to_encode takes the remaining dims (2 of 5).
  auto enc = make64({{"otype", "Composite"}, {"nested", {f, b, {{"otype", "Identity"}, {"offset", 0.5}}}}}, 5);
  ASSERT_EQ(enc->output_width(), 12u + 8 + 2);
  EXPECT_EQ(enc->n_params(), 0u);
  Pcg32 rng(4);
  const auto x = random_vector(rng, 6 * 5, 0, 1);
  const auto y = run(*enc, x);
  const auto yf = run(*make64(freq, 2), columns(x, 5, 0, 2));
  const auto yb = run(*make64(blob, 1), columns(x, 5, 2, 1));
  EXPECT_EQ(columns(y, 22, 0, 12), yf);
  EXPECT_EQ(columns(y, 22, 12, 8), yb);
  const auto yi = columns(y, 22, 20, 2), xi = columns(x, 5, 3, 2);
  for (size_t i = 0; i < xi.size(); ++i) EXPECT_DOUBLE_EQ(yi[i], xi[i] + 0.5);

  // The composite's padding goes to its last part: Identity pads after its features ...
  enc->set_alignment(16);
  ASSERT_EQ(enc->padded_output_width(), 32u);
  EXPECT_EQ(enc->output_width(), 22u);
  const auto yp = run(*enc, x);
  EXPECT_EQ(columns(yp, 32, 0, 22), y);
  for (double v : columns(yp, 32, 22, 10)) EXPECT_EQ(v, 1.0);

  // ... SphericalHarmonics before them, as in tiny-cuda-nn.
  f["n_dims_to_encode"] = 1;
  auto sh_last = make64({{"otype", "Composite"},
                         {"nested", {f, {{"otype", "SphericalHarmonics"}, {"degree", 2}}}}},
                        4, 16);
  ASSERT_EQ(sh_last->output_width(), 6u + 4);
  ASSERT_EQ(sh_last->padded_output_width(), 16u);
  const auto xs = random_vector(rng, 3 * 4, 0, 1);
  const auto ys = run(*sh_last, xs);
  const auto sh = run(*make64({{"otype", "SphericalHarmonics"}, {"degree", 2}}, 3), columns(xs, 4, 1, 3));
  for (double v : columns(ys, 16, 6, 6)) EXPECT_EQ(v, 1.0);
  EXPECT_EQ(columns(ys, 16, 12, 4), sh);
  EXPECT_EQ(columns(ys, 16, 0, 6), run(*make64(freq, 1), columns(xs, 4, 0, 1)));
}

TEST(CompositeEncoding, SumAndProductReduceColumnwise) {
  const json a = {{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 2}};
  const json b = {{"otype", "Frequency"}, {"n_frequencies", 4}, {"n_dims_to_encode", 2}};
  Pcg32 rng(6);
  const auto x = random_vector(rng, 4 * 4, 0, 1);
  const auto ya = run(*make64({{"otype", "OneBlob"}, {"n_bins", 8}}, 2), columns(x, 4, 0, 2));
  const auto yb = run(*make64({{"otype", "Frequency"}, {"n_frequencies", 4}}, 2), columns(x, 4, 2, 2));
  for (const std::string reduction : {"Sum", "Product", "sum"}) {
    auto enc = make64({{"otype", "Composite"}, {"reduction", reduction}, {"nested", {a, b}}}, 4);
    ASSERT_EQ(enc->output_width(), 16u);
    ASSERT_EQ(enc->padded_output_width(), 16u);
    const auto y = run(*enc, x);
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_DOUBLE_EQ(y[i], reduction == "Product" ? ya[i] * yb[i] : ya[i] + yb[i]) << reduction << " " << i;
    // Padding columns reduce the parts' padding (ones): the number of parts for Sum, 1 for Product.
    enc->set_alignment(32);
    ASSERT_EQ(enc->padded_output_width(), 32u);
    const auto yp = run(*enc, x);
    EXPECT_EQ(columns(yp, 32, 0, 16), y);
    for (double v : columns(yp, 32, 16, 16)) EXPECT_EQ(v, reduction == "Product" ? 1.0 : 2.0);
    EXPECT_EQ(enc->hyperparams()["reduction"], reduction == "Product" ? "Product" : "Sum");
  }
}

TEST(CompositeEncoding, DimsToEncodeBeginSelectsDims) {
  // Identity of dim 2, then Frequency of dims 0-1; dim 3 unread (zero gradient), dim 1 read
  // twice below (gradients add up).
  auto enc = make64({{"otype", "Composite"},
                     {"nested", {{{"otype", "Identity"}, {"n_dims_to_encode", 1}, {"dims_to_encode_begin", 2}},
                                 {{"otype", "Frequency"}, {"n_frequencies", 1}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 0}},
                                 {{"otype", "Identity"}, {"scale", 3.0}, {"n_dims_to_encode", 1}, {"dims_to_encode_begin", 1}}}}},
                    4);
  ASSERT_EQ(enc->output_width(), 1u + 4 + 1);
  const std::vector<double> x = {0.25, 0.5, 7.0, 9.0};
  const auto y = run(*enc, x);
  EXPECT_DOUBLE_EQ(y[0], 7.0);
  EXPECT_NEAR(y[1], std::sin(kPi * 0.25), 1e-15);
  EXPECT_NEAR(y[4], std::cos(kPi * 0.5), 1e-15);
  EXPECT_DOUBLE_EQ(y[5], 1.5);
  const auto dx = input_grad(*enc, x, {1, 0, 0, 0, 1, 1});
  EXPECT_NEAR(dx[0], 0.0, 1e-15);
  EXPECT_NEAR(dx[1], -kPi * std::sin(kPi * 0.5) + 3.0, 1e-14);
  EXPECT_DOUBLE_EQ(dx[2], 1.0);
  EXPECT_EQ(dx[3], 0.0);
  // The hyperparameters say where each part reads and rebuild the same encoding.
  const json hp = enc->hyperparams();
  EXPECT_EQ(hp["nested"][1]["dims_to_encode_begin"], 0);
  EXPECT_EQ(hp["nested"][1]["n_dims_to_encode"], 2);
  EXPECT_EQ(run(*make64(hp, 4), x), y);
}

TEST(CompositeEncoding, PartsWithZeroDimsAreDropped) {
  auto enc = make64({{"otype", "Composite"},
                     {"nested", {{{"otype", "Frequency"}, {"n_dims_to_encode", 0}}, {{"otype", "Identity"}}}}},
                    2);
  EXPECT_EQ(enc->output_width(), 2u);
  EXPECT_EQ(enc->hyperparams()["nested"].size(), 1u);
}

TEST(CompositeEncoding, StridedViews) {
  auto enc = create_encoding({{"otype", "Composite"},
                              {"nested", {{{"otype", "TriangleWave"}, {"n_frequencies", 2}, {"n_dims_to_encode", 1}},
                                          {{"otype", "OneBlob"}, {"n_bins", 2}}}}},
                             2);
  ASSERT_EQ(enc->padded_output_width(), 4u);
  std::vector<float> x = {0.1f, 0.2f, 0.3f, 0.4f}, wide(2 * 5, 0.f), y(2 * 4), ywide(2 * 7, -7.f);
  for (int r = 0; r < 2; ++r)
    for (int d = 0; d < 2; ++d) wide[r * 5 + 2 + d] = x[r * 2 + d];
  enc->inference(TensorView::matrix(x.data(), 2, 2), TensorView::matrix(y.data(), 2, 4));
  enc->inference(TensorView::matrix(wide.data(), 2, 5).cols_slice(2, 2), TensorView::matrix(ywide.data(), 2, 7).cols_slice(1, 4));
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 7; ++j) {
      if (j >= 1 && j < 5) EXPECT_EQ(ywide[r * 7 + j], y[r * 4 + j - 1]);
      else EXPECT_EQ(ywide[r * 7 + j], -7.f) << "wrote outside its view";
    }
}

// ---- NRC ----------------------------------------------------------------------------------

TEST(NrcEncoding, IsTcnnsCompositeOfTriangleWaveOneBlobIdentity) {
  auto nrc = make64({{"otype", "NRC"}}, 10);
  // 3 dims x 12 triangle waves, 5 dims x 4 bins, 2 passed through.
  EXPECT_EQ(nrc->output_width(), 3u * 12 + 5 * 4 + 2);
  auto same = make64({{"otype", "Composite"},
                      {"nested", {{{"otype", "TriangleWave"}, {"n_frequencies", 12}, {"n_dims_to_encode", 3}},
                                  {{"otype", "OneBlob"}, {"n_bins", 4}, {"n_dims_to_encode", 5}},
                                  {{"otype", "Identity"}}}}},
                     10);
  Pcg32 rng(12);
  const auto x = random_vector(rng, 9 * 10, 0, 1);
  EXPECT_EQ(run(*nrc, x), run(*same, x));
  EXPECT_EQ(nrc->hyperparams()["otype"], "Composite");
  auto custom = make64({{"otype", "OneBlobFrequency"}, {"n_frequencies", 6}, {"n_bins", 8}}, 8);
  EXPECT_EQ(custom->output_width(), 3u * 6 + 5 * 8);  // no Identity part: no dims left
  // Padding, as any Composite: after the last part.
  nrc->set_alignment(16);
  EXPECT_EQ(nrc->padded_output_width(), 64u);
  EXPECT_EQ(config_error({{"otype", "NRC"}}, 7).key(), "encoding.n_input_dims");
  EXPECT_EQ(config_error({{"otype", "NRC"}, {"n_bins", 5}}, 8).key(), "encoding.n_bins");
}

// ---- Config errors ------------------------------------------------------------------------

TEST(EncodingConfig, ErrorsNameKeyAndRule) {
  ConfigError unknown = config_error({{"otype", "Frequency"}, {"n_frequency", 4}}, 2);
  EXPECT_EQ(unknown.key(), "encoding.n_frequency");
  EXPECT_NE(std::string(unknown.what()).find("n_frequencies"), std::string::npos) << unknown.what();

  ConfigError degree = config_error({{"otype", "SphericalHarmonics"}, {"degree", 9}}, 3);
  EXPECT_EQ(degree.key(), "encoding.degree");
  EXPECT_EQ(degree.value(), "9");
  EXPECT_EQ(config_error({{"otype", "SphericalHarmonics"}, {"degree", 0}}, 3).key(), "encoding.degree");

  ConfigError dims = config_error({{"otype", "SphericalHarmonics"}}, 2);
  EXPECT_EQ(dims.key(), "encoding.n_input_dims");
  EXPECT_EQ(dims.value(), "2");
  EXPECT_EQ(dims.accepted(), "3");

  ConfigError bins = config_error({{"otype", "OneBlob"}, {"n_bins", 12}}, 2);
  EXPECT_EQ(bins.key(), "encoding.n_bins");
  EXPECT_NE(bins.rule().find("power of two"), std::string::npos);
  EXPECT_EQ(config_error({{"otype", "Frequency"}, {"n_frequencies", 0}}, 2).key(), "encoding.n_frequencies");
  EXPECT_EQ(config_error({{"otype", "TriangleWave"}, {"n_frequencies", "many"}}, 2).key(), "encoding.n_frequencies");
  EXPECT_EQ(config_error({{"otype", "Empty"}, {"scale", 1}}, 2).key(), "encoding.scale");
  EXPECT_EQ(config_error({{"otype", "Frequencies"}}, 2).key(), "encoding.otype");
}

TEST(EncodingConfig, CompositeErrors) {
  const json blob8 = {{"otype", "OneBlob"}, {"n_bins", 8}, {"n_dims_to_encode", 1}};
  const json freq2 = {{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 1}};
  ConfigError sum = config_error({{"otype", "Composite"}, {"reduction", "Sum"}, {"nested", {blob8, freq2}}}, 2);
  EXPECT_EQ(sum.key(), "encoding.reduction");
  EXPECT_NE(sum.rule().find("encoding.nested[0]: 8"), std::string::npos) << sum.what();
  EXPECT_NE(sum.rule().find("encoding.nested[1]: 4"), std::string::npos) << sum.what();
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"reduction", "Product"}, {"nested", {blob8, freq2}}}, 2).key(),
            "encoding.reduction");
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"reduction", "Mean"}, {"nested", {blob8}}}, 2).key(),
            "encoding.reduction");
  EXPECT_EQ(config_error({{"otype", "Composite"}}, 2).key(), "encoding.nested");
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", json::array()}}, 2).key(), "encoding.nested");
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", blob8}}, 2).key(), "encoding.nested");
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {blob8, 3}}}, 2).key(), "encoding.nested[1]");
  // Unknown keys inside a part are reported with the part's path.
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {{{"otype", "OneBlob"}, {"n_bin", 8}}}}}, 2).key(),
            "encoding.nested[0].n_bin");
  // More dims than the composite has.
  json blob3 = blob8;
  blob3["n_dims_to_encode"] = 3;
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {blob3}}}, 2).key(), "encoding.nested[0].n_dims_to_encode");
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {blob8, blob8, blob8}}}, 2).key(), "encoding.nested");
  // Only one part may take the remaining dims.
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {{{"otype", "Identity"}}, {{"otype", "Identity"}}}}}, 2).key(),
            "encoding.nested[1].n_dims_to_encode");
  // With dims_to_encode_begin anywhere, every part says how many dims it reads, within range.
  json begun = blob8;
  begun["dims_to_encode_begin"] = 1;
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {begun, {{"otype", "Identity"}}}}}, 2).key(),
            "encoding.nested[1].n_dims_to_encode");
  begun["dims_to_encode_begin"] = 2;
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {begun}}}, 2).key(), "encoding.nested[0].dims_to_encode_begin");
  // The part's own rules, with its path.
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {{{"otype", "SphericalHarmonics"}}}}}, 2).key(),
            "encoding.nested[0].n_input_dims");
  // n_dims_to_encode belongs to Composite entries only.
  EXPECT_EQ(config_error({{"otype", "OneBlob"}, {"n_dims_to_encode", 2}}, 2).key(), "encoding.n_dims_to_encode");
}

TEST(EncodingConfig, OtypesAreListed) {
  const auto names = encoding_otypes();
  for (const char* n : {"Identity", "Frequency", "TriangleWave", "OneBlob", "SphericalHarmonics", "Empty", "Composite",
                        "NRC", "OneBlobFrequency"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  // Case-insensitive, as tiny-cuda-nn.
  EXPECT_EQ(create_encoding({{"otype", "sphericalharmonics"}}, 3)->name(), "SphericalHarmonics");
}

// ---- Training -----------------------------------------------------------------------------

// tiny-cuda-nn's sample config (OneBlob, 64 bins) learns a smooth 2-D -> RGB function on the CPU.
TEST(OneBlobEncoding, TcnnSampleConfigTrains) {
  const json cfg = {
      {"loss", {{"otype", "RelativeL2"}}},
      {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-2}, {"beta1", 0.9}, {"beta2", 0.99}, {"epsilon", 1e-8}, {"l2_reg", 1e-8}}},
      {"encoding", {{"otype", "OneBlob"}, {"n_bins", 64}}},
      {"network", {{"otype", "FullyFusedMLP"}, {"activation", "ReLU"}, {"output_activation", "None"}, {"n_neurons", 128}, {"n_hidden_layers", 5}}}};
  Model m = create_from_config(2, 3, cfg);
  const int64_t batch = 256;
  Pcg32 rng(21);
  std::vector<float> x(batch * 2), y(batch * 3);
  std::vector<float> losses;
  // RelativeL2 divides by the prediction squared: the first steps (predictions near 0) give
  // huge losses, then the loss plateaus around 0.25 before the network picks the target up.
  for (int step = 0; step < 120; ++step) {
    for (int64_t b = 0; b < batch; ++b) {
      const float u = rng.next_float(), v = rng.next_float();
      x[2 * b] = u, x[2 * b + 1] = v;
      y[3 * b] = 0.5f + 0.4f * std::sin(6.2831853f * u);
      y[3 * b + 1] = 0.5f + 0.4f * std::cos(6.2831853f * v);
      y[3 * b + 2] = 0.2f + 0.6f * u * v;
    }
    losses.push_back(m.trainer->training_step(TensorView::matrix(x.data(), batch, 2), TensorView::matrix(y.data(), batch, 3)));
    ASSERT_TRUE(std::isfinite(losses.back())) << "step " << step;
  }
  std::vector<float> plateau(losses.begin() + 10, losses.begin() + 30);
  std::nth_element(plateau.begin(), plateau.begin() + 10, plateau.end());
  const float early = plateau[10];
  float late = 0;
  for (int i = 0; i < 10; ++i) late += losses[losses.size() - 1 - i] / 10;
  EXPECT_LT(late, 0.1f * early) << "median of steps 10-29 " << early << ", mean of the last 10 " << late;
}

}  // namespace

// CPU encodings write their compute dtype only; asking for another is a clear UnsupportedError.
TEST(Encodings, CpuOutputDtypeIsTheComputeDtype) {
  auto e = create_encoding({{"otype", "Frequency"}}, 2);
  EXPECT_NO_THROW(e->set_output_dtype(DType::F32));
  try {
    e->set_output_dtype(DType::F16);
    FAIL() << "F16 accepted by a CPU encoding";
  } catch (const UnsupportedError& err) {
    EXPECT_NE(std::string(err.what()).find("f32"), std::string::npos) << err.what();
  }
}
