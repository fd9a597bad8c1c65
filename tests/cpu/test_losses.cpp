// Losses: values against an independent FP64 formula, gradients against finite differences of
// the value (with the relative losses' normaliser held constant, as tiny-cuda-nn defines them),
// loss scaling, padded columns and data_pdf.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/loss_config.h"
#include "core/loss_math.h"
#include "testing/gradcheck.h"
#include "tinyfuse/random.h"

using namespace tinyfuse;
using tinyfuse::testing::random_vector;

namespace {

// Reference per-element value of each loss before division by N. `frozen` is the prediction the
// normaliser (denominator) is computed from; it equals p except in finite differences.
double reference_value(const std::string& loss, double p, double t, double pdf, double frozen_p, double frozen_lum) {
  const double diff = p - t;
  if (loss == "L2") return diff * diff / pdf;
  if (loss == "L1") return std::abs(diff) / pdf;
  if (loss == "RelativeL2") return diff * diff / (frozen_p * frozen_p + 0.01) / pdf;
  if (loss == "RelativeL2Luminance") return diff * diff / (frozen_lum * frozen_lum + 0.01) / pdf;
  if (loss == "RelativeL1") return std::abs(diff) / (std::abs(frozen_p) + 0.01) / pdf;
  if (loss == "MAPE") return std::abs(diff) / (std::abs(t) + 0.01) / pdf;
  if (loss == "SMAPE") return std::abs(diff) / (0.5 * (std::abs(t) + std::abs(frozen_p)) + 0.01) / pdf;
  if (loss == "CrossEntropy") return -t / pdf * std::log(p);
  if (loss == "Variance") return t * t / pdf * (1 / p - 1 / pdf);
  ADD_FAILURE() << "no reference for " << loss;
  return 0;
}

double luminance(const std::vector<double>& pred, int64_t b, int64_t width, int64_t dims) {
  const double* p = pred.data() + b * width;
  double r = p[0], g = p[1], bl = p[2];
  if (dims >= 6) r += p[3], g += p[4], bl += p[5];
  return 0.299 * r + 0.587 * g + 0.114 * bl;
}

class Losses : public ::testing::TestWithParam<std::string> {};

TEST_P(Losses, ValuesGradientsScalingAndPadding) {
  const std::string name = GetParam();
  auto loss = create_loss({{"otype", name}}, {Device::CPU, DType::F64});
  Pcg32 rng(99);
  const bool positive = name == "CrossEntropy" || name == "Variance";  // need p > 0
  for (int64_t batch : {1, 7, 256, 1000}) {
    for (bool with_pdf : {false, true}) {
      const int64_t dims = 6, width = 16;  // 10 padded columns
      auto pred = random_vector(rng, batch * width, positive ? 0.2 : -1.0, 1.0);
      auto target = random_vector(rng, batch * dims, positive ? 0.0 : -1.0, 1.0);
      auto pdf = random_vector(rng, batch * dims, 0.5, 2.0);
      std::vector<double> values(batch * width, NAN), grads(batch * width, NAN);
      const float scale = 128.0f;
      auto pv = TensorView::matrix(pred.data(), batch, width), tv = TensorView::matrix(target.data(), batch, dims);
      auto vv = TensorView::matrix(values.data(), batch, width), gv = TensorView::matrix(grads.data(), batch, width);
      auto dv = TensorView::matrix(pdf.data(), batch, dims);
      loss->evaluate(scale, pv, tv, vv, gv, with_pdf ? &dv : nullptr);
      const double n = static_cast<double>(batch * dims);
      for (int64_t b = 0; b < batch; ++b) {
        const double lum = luminance(pred, b, width, dims);
        for (int64_t d = 0; d < width; ++d) {
          const size_t i = b * width + d;
          if (d >= dims) {
            EXPECT_EQ(values[i], 0.0);
            EXPECT_EQ(grads[i], 0.0);
            continue;
          }
          const double t = target[b * dims + d], pd = with_pdf ? pdf[b * dims + d] : 1.0, p = pred[i];
          EXPECT_NEAR(values[i], reference_value(name, p, t, pd, p, lum) / n, 1e-12) << name << " at " << i;
          // d value / dp with the normaliser frozen at p (and at the sample's luminance).
          const double h = 1e-6;
          const double numeric =
              (reference_value(name, p + h, t, pd, p, lum) - reference_value(name, p - h, t, pd, p, lum)) / (2 * h) / n;
          EXPECT_NEAR(grads[i] / scale, numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << name << " at " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, Losses,
                         ::testing::Values("L2", "L1", "RelativeL2", "RelativeL2Luminance", "RelativeL1", "MAPE", "SMAPE",
                                           "CrossEntropy", "Variance"));

// For the losses whose value is a smooth function of p alone, the gradient is the true derivative
// of the library's own value: check that end to end, with no reference formula in between.
TEST(Losses, GradientIsDerivativeOfValueForPlainLosses) {
  for (std::string name : {"L2", "MAPE", "CrossEntropy", "Variance"}) {
    auto loss = create_loss({{"otype", name}}, {Device::CPU, DType::F64});
    Pcg32 rng(5);
    const int64_t batch = 17, dims = 3;
    auto pred = random_vector(rng, batch * dims, 0.2, 1.0), target = random_vector(rng, batch * dims, 0.0, 1.0);
    std::vector<double> values(pred.size()), grads(pred.size()), scratch(pred.size());
    auto pv = TensorView::matrix(pred.data(), batch, dims), tv = TensorView::matrix(target.data(), batch, dims);
    auto total = [&]() {
      loss->evaluate(1.0f, pv, tv, TensorView::matrix(values.data(), batch, dims),
                     TensorView::matrix(scratch.data(), batch, dims));
      double s = 0;
      for (double v : values) s += v;
      return s;
    };
    loss->evaluate(1.0f, pv, tv, TensorView::matrix(values.data(), batch, dims), TensorView::matrix(grads.data(), batch, dims));
    for (size_t i = 0; i < pred.size(); ++i) {
      const double saved = pred[i], h = 1e-6;
      pred[i] = saved + h;
      double up = total();
      pred[i] = saved - h;
      double down = total();
      pred[i] = saved;
      EXPECT_NEAR(grads[i], (up - down) / (2 * h), 1e-6) << name << " at " << i;
    }
  }
}

// Per-row values (batch, 1): each row's loss terms summed in groups of 8 columns, divided once,
// as loss.h defines them: bit for bit in FP32 against that definition written out with the shared
// formula, and to rounding against the sum of the per-element values. Gradients are unchanged.
TEST(Losses, PerRowValuesAreGroupedRowSums) {
  for (std::string name : {"L2", "RelativeL2Luminance", "SMAPE"}) {
    auto loss = create_loss({{"otype", name}});  // FP32
    const LossKind kind = parse_loss_config({{"otype", name}});
    Pcg32 rng(21);
    for (auto [dims, width] : {std::pair<int64_t, int64_t>{3, 3}, {6, 16}, {20, 24}, {64, 64}}) {
      SCOPED_TRACE(name + " dims " + std::to_string(dims) + " width " + std::to_string(width));
      const int64_t batch = 37;
      std::vector<float> pred(batch * width), target(batch * dims);
      for (auto& v : pred) v = rng.next_float() * 2 - 1;
      for (auto& v : target) v = rng.next_float() * 2 - 1;
      std::vector<float> values(batch * width), grads(batch * width), rows(batch, NAN), row_grads(batch * width, NAN);
      auto pv = TensorView::matrix(pred.data(), batch, width), tv = TensorView::matrix(target.data(), batch, dims);
      loss->evaluate(2.0f, pv, tv, TensorView::matrix(values.data(), batch, width),
                     TensorView::matrix(grads.data(), batch, width));
      loss->evaluate(2.0f, pv, tv, TensorView::matrix(rows.data(), batch, 1),
                     TensorView::matrix(row_grads.data(), batch, width));
      EXPECT_EQ(std::memcmp(grads.data(), row_grads.data(), grads.size() * sizeof(float)), 0) << "gradients";
      const float n = static_cast<float>(batch * dims);
      for (int64_t b = 0; b < batch; ++b) {
        const float* p = pred.data() + b * width;
        float lum = 0.0f;
        if (kind == LossKind::RelativeL2Luminance) {
          float r = p[0], g = p[1], bl = p[2];
          if (dims >= 6) r += p[3], g += p[4], bl += p[5];
          lum = loss_luminance(r, g, bl);
        }
        float row = 0.0f;
        double element_sum = 0.0;
        for (int64_t d0 = 0; d0 < width; d0 += 8) {
          float group = 0.0f;
          for (int64_t d = d0; d < std::min(d0 + 8, dims); ++d) {
            group += loss_term(kind, p[d], target[b * dims + d], 1.0f, lum).value;
            element_sum += values[b * width + d];
          }
          row += group;
        }
        EXPECT_EQ(rows[b], row / n) << "row " << b;
        EXPECT_NEAR(rows[b], element_sum, 2e-6 * std::abs(element_sum) + 1e-12) << "row " << b;  // positive terms: |sum| is the magnitude
      }
    }
  }
}

// Views whose features are adjacent take a loop made for them (cpu/losses.cpp); views with a
// column stride take the general one. Both give the same bits: every loss, with and without a
// data pdf, values per element and per row, a padded prediction.
TEST(Losses, DenseAndStridedViewsGiveTheSameBits) {
  const int64_t batch = 29, width = 24, dims = 19;
  for (const std::string& name : loss_names())
    for (const bool pdf : {false, true})
      for (const int64_t value_cols : {width, int64_t{1}}) {
        SCOPED_TRACE(name + (pdf ? " pdf" : "") + " value columns " + std::to_string(value_cols));
        auto loss = create_loss({{"otype", name}});
        Pcg32 rng(7 + value_cols + pdf);
        // Strided copies hold each element at twice its column (the odd columns are filler).
        std::vector<float> pred(batch * width), target(batch * dims), density(batch * dims);
        for (auto& v : pred) v = rng.uniform(0.05f, 1.0f);  // probabilities for CrossEntropy, Variance
        for (auto& v : target) v = rng.uniform(-1.0f, 1.0f);
        for (auto& v : density) v = rng.uniform(0.5f, 2.0f);
        auto spread = [](const std::vector<float>& v) {
          std::vector<float> s(2 * v.size(), 123.0f);
          for (size_t i = 0; i < v.size(); ++i) s[2 * i] = v[i];
          return s;
        };
        auto strided = [](std::vector<float>& v, int64_t r, int64_t c) {
          TensorView t = TensorView::matrix(v.data(), r, c);
          t.strides[0] = 2 * c, t.strides[1] = 2;
          return t;
        };
        std::vector<float> sp = spread(pred), st = spread(target), sd = spread(density);
        std::vector<float> values(batch * value_cols, NAN), grads(batch * width, NAN);
        std::vector<float> s_values(2 * batch * value_cols, NAN), s_grads(2 * batch * width, NAN);
        const TensorView dpdf = TensorView::matrix(density.data(), batch, dims), spdf = strided(sd, batch, dims);
        loss->evaluate(4.0f, TensorView::matrix(pred.data(), batch, width), TensorView::matrix(target.data(), batch, dims),
                       TensorView::matrix(values.data(), batch, value_cols), TensorView::matrix(grads.data(), batch, width),
                       pdf ? &dpdf : nullptr);
        loss->evaluate(4.0f, strided(sp, batch, width), strided(st, batch, dims), strided(s_values, batch, value_cols),
                       strided(s_grads, batch, width), pdf ? &spdf : nullptr);
        for (size_t i = 0; i < grads.size(); ++i) {
          ASSERT_FALSE(std::isnan(grads[i])) << "gradient " << i << " unwritten";
          ASSERT_EQ(std::memcmp(&grads[i], &s_grads[2 * i], 4), 0) << "gradient " << i;
        }
        for (size_t i = 0; i < values.size(); ++i) {
          ASSERT_FALSE(std::isnan(values[i])) << "value " << i << " unwritten";
          ASSERT_EQ(std::memcmp(&values[i], &s_values[2 * i], 4), 0) << "value " << i;
        }
      }
}

// Gradients written over the prediction (in place) are what a separate buffer receives, and the
// values are unchanged: the loss reads each element before it writes it.
TEST(Losses, InPlaceGradientsEqualSeparateOnes) {
  const int64_t batch = 33, width = 16, dims = 3;
  for (const std::string& name : {std::string("L2"), std::string("RelativeL2"), std::string("L1")}) {
    auto loss = create_loss({{"otype", name}});
    Pcg32 rng(4);
    std::vector<float> pred(batch * width), target(batch * dims);
    for (auto& v : pred) v = rng.uniform(0.1f, 1.0f);
    for (auto& v : target) v = rng.uniform(0.0f, 1.0f);
    std::vector<float> grads(batch * width), values(batch), in_place = pred, in_place_values(batch);
    const TensorView t = TensorView::matrix(target.data(), batch, dims);
    loss->evaluate(2.0f, TensorView::matrix(pred.data(), batch, width), t, TensorView::matrix(values.data(), batch, 1),
                   TensorView::matrix(grads.data(), batch, width));
    const TensorView ip = TensorView::matrix(in_place.data(), batch, width);
    loss->evaluate(2.0f, ip, t, TensorView::matrix(in_place_values.data(), batch, 1), ip);
    EXPECT_EQ(0, std::memcmp(grads.data(), in_place.data(), grads.size() * 4)) << name;
    EXPECT_EQ(0, std::memcmp(values.data(), in_place_values.data(), values.size() * 4)) << name;
  }
}

TEST(Losses, RejectBadShapes) {
  auto loss = create_loss({{"otype", "L2"}});
  std::vector<float> a(64), b(64), c(64), d(64);
  auto m = [](std::vector<float>& v, int64_t r, int64_t c) { return TensorView::matrix(v.data(), r, c); };
  EXPECT_THROW(loss->evaluate(1, m(a, 4, 4), m(b, 4, 5), m(c, 4, 4), m(d, 4, 4)), ShapeError);  // target wider
  EXPECT_THROW(loss->evaluate(1, m(a, 4, 4), m(b, 3, 4), m(c, 4, 4), m(d, 4, 4)), ShapeError);  // batch differs
  EXPECT_THROW(loss->evaluate(1, m(a, 4, 4), m(b, 4, 4), m(c, 4, 3), m(d, 4, 4)), ShapeError);
  EXPECT_THROW(loss->evaluate(1, m(a, 4, 4), m(b, 4, 4), m(c, 4, 2), m(d, 4, 4)), ShapeError);  // neither per element nor per row
  auto lum = create_loss({{"otype", "RelativeL2Luminance"}});
  EXPECT_THROW(lum->evaluate(1, m(a, 4, 2), m(b, 4, 2), m(c, 4, 2), m(d, 4, 2)), ShapeError);
  EXPECT_THROW(create_loss({{"otype", "L2"}, {"scale", 2}}), ConfigError);
}

}  // namespace

namespace {

// divide_by_reciprocal (core/loss_math.h) is the GPU loss epilogue's x / n: wherever
// divide_by_reciprocal_safe(x) holds it must give the division's bits, for every n a loss can
// divide by (batch x dims). Every n up to 2^16 with random x across the safe range, random n up to
// 2^40, and every float of a whole binade for n of training batches; then the range's edges.
TEST(Losses, DivisionThroughTheReciprocalIsTheDivision) {
  Pcg32 rng(2026);
  int64_t checked = 0, differ = 0;
  const auto check = [&](float x, float n) {
    if (!divide_by_reciprocal_safe(x)) return;
    const float got = divide_by_reciprocal(x, n, 1.0f / n), want = x / n;
    ++checked;
    if (std::memcmp(&got, &want, sizeof(float)) != 0 && ++differ <= 5)
      ADD_FAILURE() << std::hexfloat << x << " / " << n << ": " << got << " through the reciprocal, " << want << " divided";
  };
  const auto random_x = [&] { return std::ldexp(2.0f * rng.next_float() - 1.0f, static_cast<int>(rng.next_uint() % 120) - 59); };
  for (int n = 1; n <= (1 << 16); ++n)
    for (int k = 0; k < 64; ++k) check(random_x(), static_cast<float>(n));
  for (int i = 0; i < 1000000; ++i)
    check(random_x(), static_cast<float>(1 + ((static_cast<uint64_t>(rng.next_uint()) << 8) ^ rng.next_uint()) % (1ull << 40)));
  for (float n : {7.0f * 4099, 64.0f * 1048576, 64.0f * 1048579, 40.0f * 70001}) {
    uint32_t one;
    const float f = 1.0f;
    std::memcpy(&one, &f, sizeof(f));
    for (uint32_t bits = one; bits < one + (1u << 23); bits += 3) {
      float x;
      std::memcpy(&x, &bits, sizeof(x));
      check(x, n);
      check(-3.0f * x, n);
    }
  }
  EXPECT_EQ(differ, 0) << "of " << checked;
  EXPECT_GT(checked, 10000000);
  // The safe range: zero, Inf, NaN and values near under- or overflow are left to the division.
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-61f, 0x1p+60f, -0x1p+61f}) EXPECT_FALSE(divide_by_reciprocal_safe(x)) << x;
  for (float x : {0x1p-60f, -0x1p-60f, 1.0f, 0x1.fffffep+59f}) EXPECT_TRUE(divide_by_reciprocal_safe(x)) << x;
}

}  // namespace
