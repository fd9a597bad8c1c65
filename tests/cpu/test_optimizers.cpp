// CPU optimizers against straightforward double-precision references of tiny-cuda-nn's
// semantics, config checking, and state save / load.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/optimizer_config.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/factory.h"

namespace tinyfuse {
namespace {

using Kind = ParamSegment::Kind;

std::unique_ptr<Optimizer> make(const json& config) { return create_optimizer(config); }

ParamSegment seg(size_t offset, size_t count, Kind kind) {
  ParamSegment s;
  s.offset = offset;
  s.count = count;
  s.kind = kind;
  return s;
}

std::vector<bool> matrix_mask(size_t n, const std::vector<ParamSegment>& segments) {
  std::vector<bool> m(n, false);
  for (const auto& s : segments)
    if (s.kind == Kind::Matrix)
      for (size_t i = s.offset; i < s.offset + s.count; ++i) m[i] = true;
  return m;
}

// Float-representable values in +-[lo, hi].
std::vector<double> random_values(size_t n, uint32_t seed, double lo = 0.1, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = static_cast<float>((rng() & 1 ? 1 : -1) * mag(rng));
  return v;
}

// The buffers a Trainer hands an optimizer: FP32 master, params of type P, gradients of type P.
template <typename P>
struct Weights {
  std::vector<float> master;
  std::vector<P> params;
  explicit Weights(const std::vector<double>& init) : master(init.begin(), init.end()), params(init.begin(), init.end()) {}
  size_t n() const { return master.size(); }
  TensorView master_view() { return TensorView::vector(master.data(), static_cast<int64_t>(n())); }
  TensorView params_view() { return TensorView::vector(params.data(), static_cast<int64_t>(n())); }
  // `scaled` are loss_scale * dL/dw.
  void step(Optimizer& opt, float loss_scale, const std::vector<double>& scaled) {
    std::vector<P> g(scaled.begin(), scaled.end());
    opt.step(loss_scale, master_view(), params_view(), TensorView::vector(g.data(), static_cast<int64_t>(n())));
    for (size_t i = 0; i < n(); ++i) ASSERT_EQ(params[i], static_cast<P>(master[i])) << "params[" << i << "]";
  }
};

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

// ---- references (double) -----------------------------------------------------------------

struct RefAdam {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, l2 = 1e-8;
  double relative_decay = 0, absolute_decay = 0, clipping = 0, non_matrix_factor = 1;
  double non_matrix_l2 = 0, gradient_clipping = 0;
  bool adabound = false, optimize_matrix = true, optimize_non_matrix = true, skip_zero_grad = true;
  std::vector<double> m, v;
  std::vector<uint32_t> t;
  uint32_t step = 0;

  void update(std::vector<double>& w, const std::vector<double>& scaled, double loss_scale, const std::vector<bool>& matrix) {
    if (m.empty()) m.assign(w.size(), 0.0), v.assign(w.size(), 0.0), t.assign(w.size(), 0);
    ++step;
    double lo = 0, hi = std::numeric_limits<double>::infinity();
    if (adabound) {
      lo = 0.1 - 0.1 / ((1 - beta2) * step + 1);
      hi = 0.1 + 0.1 / ((1 - beta2) * step);
    }
    for (size_t i = 0; i < w.size(); ++i) {
      double g = scaled[i] / loss_scale;
      if (matrix[i]) {
        if (!optimize_matrix) continue;
        g += l2 * w[i];
      } else if (!optimize_non_matrix || (g == 0 && skip_zero_grad)) {
        continue;
      } else {
        g += non_matrix_l2 * w[i];
      }
      if (gradient_clipping != 0) g = std::copysign(std::min(std::abs(g), gradient_clipping), g);
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      ++t[i];
      const double a = lr * (matrix[i] ? 1 : non_matrix_factor) * std::sqrt(1 - std::pow(beta2, t[i])) /
                       (1 - std::pow(beta1, t[i]));
      const double rate = std::min(std::max(a / (std::sqrt(v[i]) + eps), lo), hi);
      double nw = (1 - relative_decay * a) * w[i] - std::copysign(absolute_decay * a, w[i]) - rate * m[i];
      if (clipping != 0) nw = std::min(std::max(nw, -clipping), clipping);
      w[i] = nw;
    }
  }
};

void ref_sgd(std::vector<double>& w, const std::vector<double>& scaled, double loss_scale, double lr, double l2) {
  for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * (scaled[i] / loss_scale + l2 * w[i]);
}

// ---- Adam --------------------------------------------------------------------------------

TEST(OptimizerAdam, MatchesReferenceWithSegmentsL2FactorZeroSkipAndLossScale) {
  const size_t n = 12;
  const std::vector<ParamSegment> segments = {seg(0, 6, Kind::Matrix), seg(6, 3, Kind::Vector), seg(9, 3, Kind::Grid)};
  const json config = {{"otype", "Adam"}, {"learning_rate", 0.01}, {"beta1", 0.8},  {"beta2", 0.95},
                       {"epsilon", 1e-6},  {"l2_reg", 0.05},        {"non_matrix_learning_rate_factor", 0.5}};
  auto opt = make(config);
  opt->allocate(n, segments);
  RefAdam ref;
  ref.lr = 0.01, ref.beta1 = 0.8, ref.beta2 = 0.95, ref.eps = 1e-6, ref.l2 = 0.05, ref.non_matrix_factor = 0.5;

  std::vector<double> w = random_values(n, 1);
  Weights<double> weights(w);
  const float loss_scale = 128.0f;
  for (int s = 0; s < 6; ++s) {
    std::vector<double> g = random_values(n, 100 + s, 0.01, 2.0);
    if (s < 2) g[7] = 0;  // a vector entry without gradient: skipped, its counter lags
    if (s == 3) g[10] = 0;
    if (s == 2) g[2] = 0;  // a matrix entry: not skipped (l2 and momentum still act)
    for (auto& x : g) x = static_cast<float>(x * loss_scale);
    const std::vector<float> before = weights.master;
    weights.step(*opt, loss_scale, g);
    ref.update(w, g, loss_scale, matrix_mask(n, segments));
    expect_close(weights.master, w, 2e-6, "step " + std::to_string(s));
    if (s < 2) {
      EXPECT_EQ(weights.master[7], before[7]);
    }
    if (s == 3) {
      EXPECT_EQ(weights.master[10], before[10]);
    }
    if (s == 2) {
      EXPECT_NE(weights.master[2], before[2]);
    }
  }
  EXPECT_EQ(opt->step_count(), 6u);
}

TEST(OptimizerAdam, DecayClippingAdaBoundMatchReference) {
  const size_t n = 9;
  const std::vector<ParamSegment> segments = {seg(3, 4, Kind::Matrix)};  // the rest is in no segment
  const json config = {{"learning_rate", 0.05}, {"relative_decay", 0.2}, {"absolute_decay", 0.01},
                       {"clipping_magnitude", 0.6}, {"adabound", true}};
  auto opt = make(config);
  EXPECT_EQ(opt->name(), "Adam");
  opt->allocate(n, segments);
  RefAdam ref;
  ref.lr = 0.05, ref.relative_decay = 0.2, ref.absolute_decay = 0.01, ref.clipping = 0.6, ref.adabound = true;
  std::vector<double> w = random_values(n, 2);
  Weights<float> weights(w);
  for (int s = 0; s < 5; ++s) {
    std::vector<double> g = random_values(n, 200 + s);
    weights.step(*opt, 1.0f, g);
    ref.update(w, g, 1.0, matrix_mask(n, segments));
    expect_close(weights.master, w, 2e-6, "step " + std::to_string(s));
  }
}

// The keys tiny-cuda-nn's Adam reads beyond the classic ones: l2 on non-matrix params, clipping
// of each gradient, and updating non-matrix params whose gradient is zero.
TEST(OptimizerAdam, NonMatrixL2GradientClippingAndZeroGradUpdatesMatchReference) {
  const size_t n = 10;
  const std::vector<ParamSegment> segments = {seg(0, 4, Kind::Matrix), seg(4, 3, Kind::Vector), seg(7, 3, Kind::Grid)};
  const json config = {{"learning_rate", 0.02},
                       {"l2_reg", 0.01},
                       {"non_matrix_l2_reg", 0.3},
                       {"gradient_clipping_magnitude", 0.25},
                       {"skip_zero_grad_non_matrix_params", false}};
  auto opt = make(config);
  opt->allocate(n, segments);
  const json h = opt->hyperparams();
  EXPECT_EQ(h.at("non_matrix_l2_reg").get<double>(), 0.3);
  EXPECT_EQ(h.at("gradient_clipping_magnitude").get<double>(), 0.25);
  EXPECT_EQ(h.at("skip_zero_grad_non_matrix_params").get<bool>(), false);
  RefAdam ref;
  ref.lr = 0.02, ref.l2 = 0.01, ref.non_matrix_l2 = 0.3, ref.gradient_clipping = 0.25, ref.skip_zero_grad = false;
  std::vector<double> w = random_values(n, 5);
  Weights<float> weights(w);
  for (int s = 0; s < 5; ++s) {
    std::vector<double> g = random_values(n, 300 + s, 0.01, 2.0);  // many beyond the clipping
    g[8] = 0;  // a grid entry without gradient: still updated (its l2 term and momentum act)
    const std::vector<float> before = weights.master;
    weights.step(*opt, 1.0f, g);
    ref.update(w, g, 1.0, matrix_mask(n, segments));
    expect_close(weights.master, w, 2e-6, "step " + std::to_string(s));
    EXPECT_NE(weights.master[8], before[8]) << "step " << s;
  }
  // The defaults are tiny-cuda-nn's: no non-matrix l2, no gradient clipping, zero grads skipped.
  const json d = make({{"otype", "Adam"}})->hyperparams();
  EXPECT_EQ(d.at("non_matrix_l2_reg").get<double>(), 0.0);
  EXPECT_EQ(d.at("gradient_clipping_magnitude").get<double>(), 0.0);
  EXPECT_EQ(d.at("skip_zero_grad_non_matrix_params").get<bool>(), true);
}

TEST(OptimizerAdam, OptimizeMatrixAndNonMatrixSwitches) {
  const size_t n = 6;
  const std::vector<ParamSegment> segments = {seg(0, 3, Kind::Matrix), seg(3, 3, Kind::Vector)};
  for (bool matrix_on : {false, true}) {
    auto opt = make({{"optimize_matrix_params", matrix_on}, {"optimize_non_matrix_params", !matrix_on}});
    opt->allocate(n, segments);
    const std::vector<double> w = random_values(n, 3);
    Weights<float> weights(w);
    weights.step(*opt, 1.0f, random_values(n, 4));
    for (size_t i = 0; i < n; ++i) {
      const bool frozen = (i < 3) != matrix_on;
      if (frozen)
        EXPECT_EQ(weights.master[i], static_cast<float>(w[i])) << i;
      else
        EXPECT_NE(weights.master[i], static_cast<float>(w[i])) << i;
    }
  }
}

TEST(OptimizerAdam, LossScaleIsDividedOut) {
  const std::vector<ParamSegment> segments = {seg(0, 4, Kind::Matrix), seg(4, 4, Kind::Vector)};
  auto a = make({{"learning_rate", 0.01}}), b = make({{"learning_rate", 0.01}});
  a->allocate(8, segments);
  b->allocate(8, segments);
  const std::vector<double> w = random_values(8, 5);
  Weights<float> wa(w), wb(w);
  for (int s = 0; s < 3; ++s) {
    std::vector<double> g = random_values(8, 300 + s), g128 = g;
    for (auto& x : g128) x *= 128;  // exact: a power of two
    wa.step(*a, 1.0f, g);
    wb.step(*b, 128.0f, g128);
  }
  EXPECT_EQ(wa.master, wb.master);
}

TEST(OptimizerAdam, ParamsAliasingMasterAndF64ParamsGiveTheSameMaster) {
  const size_t n = 10;
  const std::vector<ParamSegment> segments = {seg(0, 5, Kind::Matrix), seg(5, 5, Kind::Grid)};
  auto a = make(json::object()), b = make(json::object()), c = make(json::object());
  for (auto* o : {a.get(), b.get(), c.get()}) o->allocate(n, segments);
  const std::vector<double> w = random_values(n, 6);
  Weights<float> wa(w);
  Weights<double> wb(w);
  std::vector<float> alias(w.begin(), w.end());
  for (int s = 0; s < 3; ++s) {
    const std::vector<double> g = random_values(n, 400 + s);
    wa.step(*a, 1.0f, g);
    wb.step(*b, 1.0f, g);
    std::vector<float> gf(g.begin(), g.end());
    TensorView view = TensorView::vector(alias.data(), static_cast<int64_t>(n));
    c->step(1.0f, view, view, TensorView::vector(gf.data(), static_cast<int64_t>(n)));
  }
  EXPECT_EQ(wa.master, wb.master);
  EXPECT_EQ(wa.master, alias);
}

TEST(OptimizerAdam, LargeBufferAcrossParallelChunksMatchesReference) {
  const size_t n = 100003;
  const std::vector<ParamSegment> segments = {seg(0, 20000, Kind::Matrix), seg(20000, 30000, Kind::Vector),
                                              seg(50000, 20011, Kind::Matrix), seg(70011, n - 70011, Kind::Grid)};
  auto opt = make({{"learning_rate", 0.02}, {"l2_reg", 0.1}, {"non_matrix_learning_rate_factor", 3.0}});
  opt->allocate(n, segments);
  RefAdam ref;
  ref.lr = 0.02, ref.l2 = 0.1, ref.non_matrix_factor = 3.0;
  std::vector<double> w = random_values(n, 7);
  Weights<float> weights(w);
  const auto mask = matrix_mask(n, segments);
  for (int s = 0; s < 3; ++s) {
    std::vector<double> g = random_values(n, 500 + s);
    for (size_t i = s; i < n; i += 7) g[i] = 0;
    weights.step(*opt, 1.0f, g);
    ref.update(w, g, 1.0, mask);
  }
  expect_close(weights.master, w, 2e-6, "large");
}

TEST(OptimizerAdam, DefaultsAndHyperparams) {
  auto opt = make(json::object());  // no otype: Adam
  const json h = opt->hyperparams();
  EXPECT_EQ(h.at("otype"), "Adam");
  EXPECT_DOUBLE_EQ(h.at("learning_rate").get<double>(), 1e-3);
  EXPECT_DOUBLE_EQ(h.at("beta1").get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(h.at("beta2").get<double>(), 0.999);
  EXPECT_DOUBLE_EQ(h.at("epsilon").get<double>(), 1e-8);
  EXPECT_DOUBLE_EQ(h.at("l2_reg").get<double>(), 1e-8);
  EXPECT_EQ(h.at("adabound"), false);
  EXPECT_EQ(h.at("optimize_non_matrix_params"), true);
  EXPECT_FLOAT_EQ(opt->learning_rate(), 1e-3f);
  opt->set_learning_rate(0.25f);
  EXPECT_EQ(opt->hyperparams().at("learning_rate").get<double>(), 0.25);
}

TEST(OptimizerAdam, RejectsNonFiniteLearningRatesAndBadCalls) {
  for (const char* otype : {"Adam", "SGD", "ExponentialDecay", "EMA"}) {
    auto opt = make({{"otype", otype}});
    const float lr = opt->learning_rate();
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -1.0f})
      EXPECT_THROW(opt->set_learning_rate(bad), Error) << otype;
    EXPECT_EQ(opt->learning_rate(), lr) << otype;
  }
  auto comp = make({{"otype", "Composite"}, {"nested", {{{"n_params_to_optimize", 1}}}}});
  EXPECT_THROW(comp->set_learning_rate(std::nanf("")), Error);
  EXPECT_EQ(comp->learning_rate(), 1.0f);

  auto opt = make(json::object());
  std::vector<float> m(4), g(4);
  TensorView v = TensorView::vector(m.data(), 4), gv = TensorView::vector(g.data(), 4);
  EXPECT_THROW(opt->step(1.0f, v, v, gv), Error);  // before allocate
  opt->allocate(4, {});
  EXPECT_THROW(opt->step(1.0f, v, v, TensorView::vector(g.data(), 3)), ShapeError);
  EXPECT_THROW(opt->step(0.0f, v, v, gv), Error);
  EXPECT_THROW(opt->allocate(4, {seg(2, 3, Kind::Matrix)}), ShapeError);
}

// ---- SGD ---------------------------------------------------------------------------------

TEST(OptimizerSgd, MatchesReferenceOnEveryParam) {
  const size_t n = 7;
  auto opt = make({{"otype", "sgd"}, {"learning_rate", 0.1}, {"l2_reg", 0.01}});
  EXPECT_EQ(opt->name(), "SGD");
  opt->allocate(n, {seg(0, 3, Kind::Matrix), seg(3, 4, Kind::Vector)});
  std::vector<double> w = random_values(n, 8);
  Weights<double> weights(w);
  for (int s = 0; s < 4; ++s) {
    std::vector<double> g = random_values(n, 600 + s);
    g[4] = 0;  // no skip in SGD: l2 still decays it
    for (auto& x : g) x *= 4;
    weights.step(*opt, 4.0f, g);
    ref_sgd(w, g, 4.0, 0.1, 0.01);
    expect_close(weights.master, w, 1e-6, "step " + std::to_string(s));
  }
  EXPECT_EQ(opt->step_count(), 4u);
  const json d = make({{"otype", "SGD"}})->hyperparams();
  EXPECT_DOUBLE_EQ(d.at("learning_rate").get<double>(), 1e-3);
  EXPECT_DOUBLE_EQ(d.at("l2_reg").get<double>(), 1e-8);
}

// ---- ExponentialDecay --------------------------------------------------------------------

TEST(OptimizerExponentialDecay, ScheduleTiming) {
  // SGD with lr 1 on one parameter with gradient 1: each update moves w by exactly the rate used.
  auto opt = make({{"otype", "ExponentialDecay"},
                   {"decay_base", 0.5},
                   {"decay_start", 2},
                   {"decay_interval", 2},
                   {"decay_end", 5},
                   {"nested", {{"otype", "SGD"}, {"learning_rate", 1.0}, {"l2_reg", 0.0}}}});
  opt->allocate(1, {});
  Weights<float> weights({0.0});
  // Update k (1-based) sees s = k - 1 finished updates; s = 2 and s = 4 decay, s = 6 is past decay_end.
  const std::vector<double> rates = {1, 1, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25};
  double w = 0;
  for (size_t k = 0; k < rates.size(); ++k) {
    weights.step(*opt, 1.0f, {1.0});
    w -= rates[k];
    EXPECT_DOUBLE_EQ(weights.master[0], w) << "update " << k + 1;
    EXPECT_DOUBLE_EQ(opt->learning_rate(), rates[k]) << "update " << k + 1;
  }
  EXPECT_EQ(opt->step_count(), rates.size());
}

TEST(OptimizerExponentialDecay, FirstDecayedUpdateIsDecayStartPlusOneAndSetLearningRate) {
  auto opt = make({{"otype", "ExponentialDecay"}, {"decay_base", 0.1}, {"decay_start", 3}, {"decay_interval", 100},
                   {"nested", {{"otype", "SGD"}, {"learning_rate", 2.0}, {"l2_reg", 0.0}}}});
  opt->allocate(1, {});
  Weights<float> weights({0.0});
  std::vector<float> deltas;
  for (int k = 0; k < 5; ++k) {
    const float before = weights.master[0];
    weights.step(*opt, 1.0f, {1.0});
    deltas.push_back(before - weights.master[0]);
  }
  EXPECT_NEAR(deltas[2], 2.0, 1e-6);  // update 3
  EXPECT_NEAR(deltas[3], 0.2, 1e-6);  // update 4 = decay_start + 1
  EXPECT_NEAR(deltas[4], 0.2, 1e-6);
  // set_learning_rate sets the current rate; the schedule keeps its factor.
  opt->set_learning_rate(0.5f);
  EXPECT_FLOAT_EQ(opt->learning_rate(), 0.5f);
  const float before = weights.master[0];
  weights.step(*opt, 1.0f, {1.0});
  EXPECT_NEAR(before - weights.master[0], 0.5, 1e-6);

  const json d = make({{"otype", "exponentialdecay"}})->hyperparams();
  EXPECT_EQ(d.at("otype"), "ExponentialDecay");
  EXPECT_DOUBLE_EQ(d.at("decay_base").get<double>(), 0.1);
  EXPECT_EQ(d.at("decay_start"), 10000);
  EXPECT_EQ(d.at("decay_interval"), 10000);
  EXPECT_EQ(d.at("decay_end"), 10000000);
  EXPECT_EQ(d.at("nested").at("otype"), "Adam");
}

// ---- EMA ---------------------------------------------------------------------------------

TEST(OptimizerEma, BiasCorrectedAverageOfTheTrainedWeights) {
  const size_t n = 5;
  const double decay = 0.9;
  auto opt = make({{"otype", "Ema"}, {"decay", decay}, {"nested", {{"otype", "SGD"}, {"learning_rate", 0.1}, {"l2_reg", 0.0}}}});
  EXPECT_EQ(opt->name(), "EMA");
  EXPECT_TRUE(opt->has_inference_params());
  opt->allocate(n, {});
  std::vector<double> inference(n);
  TensorView out = TensorView::vector(inference.data(), static_cast<int64_t>(n));
  EXPECT_THROW(opt->write_inference_params(out), Error);  // no average before the first step

  std::vector<double> w = random_values(n, 9);
  Weights<double> weights(w);
  std::vector<std::vector<double>> history;
  for (int t = 1; t <= 6; ++t) {
    const std::vector<double> g = random_values(n, 700 + t);
    weights.step(*opt, 1.0f, g);
    ref_sgd(w, g, 1.0, 0.1, 0.0);
    history.push_back(w);
    opt->write_inference_params(out);
    // Direct formula: sum_k decay^(t-k) (1-decay) w_k / (1 - decay^t).
    for (size_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int k = 1; k <= t; ++k) sum += std::pow(decay, t - k) * (1 - decay) * history[k - 1][i];
      EXPECT_NEAR(inference[i], sum / (1 - std::pow(decay, t)), 2e-6) << "t " << t << " i " << i;
    }
    if (t == 1) {
      for (size_t i = 0; i < n; ++i) EXPECT_NEAR(inference[i], weights.master[i], 1e-7);
    }
    // Training continues on the raw weights.
    expect_close(weights.master, w, 1e-6, "raw");
  }
  const json d = make({{"otype", "EMA"}})->hyperparams();
  EXPECT_DOUBLE_EQ(d.at("decay").get<double>(), 0.99);
  EXPECT_EQ(d.at("full_precision"), false);
  EXPECT_EQ(d.at("nested").at("otype"), "Adam");
}

// ---- Composite ---------------------------------------------------------------------------

TEST(OptimizerComposite, SplitsBufferAndRebasesSegments) {
  const size_t n = 10;
  const std::vector<ParamSegment> segments = {seg(0, 3, Kind::Vector), seg(3, 4, Kind::Matrix), seg(7, 3, Kind::Vector)};
  auto opt = make({{"otype", "Composite"},
                   {"nested",
                    {{{"otype", "SGD"}, {"learning_rate", 0.1}, {"l2_reg", 0.0}, {"n_params_to_optimize", 3}},
                     {{"otype", "Adam"}, {"learning_rate", 0.01}, {"l2_reg", 0.2}, {"n_params_to_optimize", 7}}}}});
  EXPECT_EQ(opt->name(), "Composite");
  opt->allocate(n, segments);
  std::vector<double> w = random_values(n, 10);
  Weights<float> weights(w);
  std::vector<double> w_sgd(w.begin(), w.begin() + 3), w_adam(w.begin() + 3, w.end());
  RefAdam ref;
  ref.lr = 0.01, ref.l2 = 0.2;
  // Adam's slice: global [3, 10) = matrix [0, 4) then vector [4, 7) after rebasing.
  const std::vector<bool> adam_mask = {true, true, true, true, false, false, false};
  for (int s = 0; s < 4; ++s) {
    std::vector<double> g = random_values(n, 800 + s);
    g[8] = 0;  // vector entry of Adam's slice: skipped
    g[4] = 0;  // matrix entry of Adam's slice: not skipped
    weights.step(*opt, 1.0f, g);
    ref_sgd(w_sgd, std::vector<double>(g.begin(), g.begin() + 3), 1.0, 0.1, 0.0);
    ref.update(w_adam, std::vector<double>(g.begin() + 3, g.end()), 1.0, adam_mask);
  }
  std::vector<double> want = w_sgd;
  want.insert(want.end(), w_adam.begin(), w_adam.end());
  expect_close(weights.master, want, 2e-6, "composite");
  EXPECT_EQ(weights.master[8], static_cast<float>(w[8]));
  EXPECT_EQ(opt->step_count(), 4u);

  // Learning rate is a factor on each nested optimizer's initial rate.
  EXPECT_EQ(opt->learning_rate(), 1.0f);
  opt->set_learning_rate(0.5f);
  const json h = opt->hyperparams();
  EXPECT_FLOAT_EQ(h.at("nested")[0].at("learning_rate").get<float>(), 0.05f);
  EXPECT_FLOAT_EQ(h.at("nested")[1].at("learning_rate").get<float>(), 0.005f);
  EXPECT_EQ(h.at("nested")[1].at("n_params_to_optimize"), 7);
}

TEST(OptimizerComposite, CountsMustSumToNParams) {
  auto opt = make({{"otype", "Composite"},
                   {"nested", {{{"otype", "SGD"}, {"n_params_to_optimize", 3}}, {{"n_params_to_optimize", 4}}}}});
  try {
    opt->allocate(10, {});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "optimizer.nested");
    EXPECT_NE(std::string(e.what()).find("3 + 4 = 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("10"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(opt->allocate(7, {}));
}

TEST(OptimizerComposite, InferenceParamsFromNestedEma) {
  const size_t n = 4;
  auto opt = make({{"otype", "Composite"},
                   {"nested",
                    {{{"otype", "SGD"}, {"learning_rate", 0.1}, {"n_params_to_optimize", 2}},
                     {{"otype", "EMA"}, {"decay", 0.5}, {"n_params_to_optimize", 2},
                      {"nested", {{"otype", "SGD"}, {"learning_rate", 0.1}}}}}}});
  EXPECT_TRUE(opt->has_inference_params());
  opt->allocate(n, {});
  Weights<float> weights(random_values(n, 11));
  std::vector<float> inference(n);
  std::vector<float> w1;
  for (int t = 1; t <= 2; ++t) {
    weights.step(*opt, 1.0f, random_values(n, 900 + t));
    if (t == 1) w1 = weights.master;
  }
  opt->write_inference_params(TensorView::vector(inference.data(), static_cast<int64_t>(n)));
  EXPECT_EQ(inference[0], weights.master[0]);  // plain slice: the trained weights
  EXPECT_EQ(inference[1], weights.master[1]);
  for (size_t i = 2; i < 4; ++i)  // EMA slice, t = 2, decay 0.5: (0.5 * 0.5 w1 + 0.5 w2) / 0.75
    EXPECT_NEAR(inference[i], (0.25 * w1[i] + 0.5 * weights.master[i]) / 0.75, 1e-6);
}

// ---- config errors -----------------------------------------------------------------------

ConfigError config_error(const json& config) {
  try {
    make(config);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for " << config.dump();
  return ConfigError("", "", "", "");
}

TEST(OptimizerConfig, UnknownKeyWithSuggestion) {
  ConfigError e = config_error({{"otype", "Adam"}, {"learnig_rate", 0.1}});
  EXPECT_EQ(e.key(), "optimizer.learnig_rate");
  EXPECT_NE(e.rule().find("did you mean \"learning_rate\""), std::string::npos) << e.what();
  // n_params_to_optimize belongs to Composite entries only.
  EXPECT_EQ(config_error({{"n_params_to_optimize", 3}}).key(), "optimizer.n_params_to_optimize");
  // An SGD takes no Adam keys.
  EXPECT_EQ(config_error({{"otype", "SGD"}, {"beta1", 0.9}}).key(), "optimizer.beta1");
}

TEST(OptimizerConfig, WrongTypesAndRanges) {
  ConfigError t = config_error({{"beta1", "0.9"}});
  EXPECT_EQ(t.key(), "optimizer.beta1");
  EXPECT_NE(t.rule().find("must be a number"), std::string::npos) << t.what();
  EXPECT_EQ(config_error({{"adabound", 1}}).key(), "optimizer.adabound");
  EXPECT_EQ(config_error({{"beta1", 1.0}}).key(), "optimizer.beta1");
  EXPECT_EQ(config_error({{"beta2", -0.1}}).key(), "optimizer.beta2");
  EXPECT_EQ(config_error({{"learning_rate", 0}}).key(), "optimizer.learning_rate");
  EXPECT_EQ(config_error({{"learning_rate", 1e39}}).key(), "optimizer.learning_rate");  // not a float
  EXPECT_EQ(config_error({{"epsilon", -1e-8}}).key(), "optimizer.epsilon");
  EXPECT_EQ(config_error({{"l2_reg", -1}}).key(), "optimizer.l2_reg");
  EXPECT_EQ(config_error({{"otype", "SGD"}, {"learning_rate", -0.1}}).key(), "optimizer.learning_rate");
  EXPECT_EQ(config_error({{"otype", "ExponentialDecay"}, {"decay_interval", 0}}).key(), "optimizer.decay_interval");
  EXPECT_EQ(config_error({{"otype", "ExponentialDecay"}, {"decay_start", 1.5}}).key(), "optimizer.decay_start");
  EXPECT_EQ(config_error({{"otype", "EMA"}, {"decay", 1.0}}).key(), "optimizer.decay");
  EXPECT_EQ(config_error({{"otype", "EMA"}, {"nested", 3}}).key(), "optimizer.nested");
  EXPECT_EQ(config_error({{"otype", 5}}).key(), "optimizer.otype");
  ConfigError o = config_error({{"otype", "Adamm"}});
  EXPECT_EQ(o.key(), "optimizer.otype");
  EXPECT_NE(o.rule().find("did you mean \"Adam\""), std::string::npos) << o.what();
  EXPECT_EQ(config_error(json::array()).key(), "optimizer");
}

TEST(OptimizerConfig, CompositeNestedArrayAndNestedPaths) {
  EXPECT_EQ(config_error({{"otype", "Composite"}}).key(), "optimizer.nested");
  ConfigError empty = config_error({{"otype", "Composite"}, {"nested", json::array()}});
  EXPECT_EQ(empty.key(), "optimizer.nested");
  EXPECT_NE(empty.rule().find("empty"), std::string::npos) << empty.what();
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {{"otype", "Adam"}}}}).key(), "optimizer.nested");
  EXPECT_EQ(config_error({{"otype", "Composite"},
                          {"nested", {{{"n_params_to_optimize", 1}}, {{"n_params_to_optimize", 2}, {"beta2", 2}}}}})
                .key(),
            "optimizer.nested[1].beta2");
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {{{"n_params_to_optimize", -1}}}}}).key(),
            "optimizer.nested[0].n_params_to_optimize");
  EXPECT_EQ(config_error({{"otype", "Composite"}, {"nested", {{{"n_params_to_optimize", 1}}, 7}}}).key(),
            "optimizer.nested[1]");
  EXPECT_EQ(config_error({{"otype", "EMA"}, {"nested", {{"otype", "Adm"}}}}).key(), "optimizer.nested.otype");
  EXPECT_EQ(config_error({{"otype", "ExponentialDecay"}, {"nested", {{"otype", "EMA"}, {"nested", {{"bogus", 1}}}}}}).key(),
            "optimizer.nested.nested.bogus");
}

TEST(OptimizerConfig, OtypesAreCaseInsensitiveAndSpecIsDeviceNeutral) {
  for (const char* o : {"adam", "SGD", "Ema", "ema", "EXPONENTIALDECAY"}) EXPECT_NO_THROW(make({{"otype", o}})) << o;
  OptimizerSpec spec = parse_optimizer_config(
      {{"otype", "composite"},
       {"nested", {{{"otype", "ema"}, {"n_params_to_optimize", 5}}, {{"otype", "sgd"}, {"n_params_to_optimize", 6}}}}});
  EXPECT_EQ(spec.kind, OptimizerKind::Composite);
  ASSERT_EQ(spec.nested.size(), 2u);
  EXPECT_EQ(spec.nested[0].otype, "EMA");
  EXPECT_EQ(spec.nested[0].path, "optimizer.nested[0]");
  EXPECT_EQ(spec.nested[0].n_params_to_optimize, 5u);
  ASSERT_EQ(spec.nested[0].nested.size(), 1u);
  EXPECT_EQ(spec.nested[0].nested[0].kind, OptimizerKind::Adam);
  EXPECT_EQ(spec.nested[0].nested[0].path, "optimizer.nested[0].nested");
  EXPECT_EQ(spec.nested[1].kind, OptimizerKind::SGD);
}

// ---- state -------------------------------------------------------------------------------

const std::vector<ParamSegment> kStateSegments = {seg(0, 6, Kind::Matrix), seg(6, 4, Kind::Vector), seg(10, 6, Kind::Grid)};
constexpr size_t kStateN = 16;

std::vector<double> state_gradient(int s) {
  std::vector<double> g = random_values(kStateN, 1000 + s);
  for (size_t i = 6 + s % 3; i < kStateN; i += 3) g[i] = 0;  // uneven per-parameter step counts
  return g;
}

std::vector<json> state_configs() {
  return {
      {{"otype", "Adam"}, {"learning_rate", 0.01}, {"adabound", true}},
      {{"otype", "SGD"}, {"learning_rate", 0.05}},
      {{"otype", "ExponentialDecay"}, {"decay_start", 1}, {"decay_interval", 2}, {"decay_base", 0.5},
       {"nested", {{"learning_rate", 0.01}}}},
      {{"otype", "EMA"}, {"decay", 0.8}, {"nested", {{"learning_rate", 0.01}}}},
      {{"otype", "Composite"},
       {"nested",
        {{{"otype", "Adam"}, {"n_params_to_optimize", 8}},
         {{"otype", "EMA"}, {"n_params_to_optimize", 8}, {"nested", {{"otype", "SGD"}}}}}}},
  };
}

TEST(OptimizerState, RoundTripContinuesIdentically) {
  for (const json& config : state_configs()) {
    SCOPED_TRACE(config.dump());
    auto a = make(config), b = make(config);
    a->allocate(kStateN, kStateSegments);
    b->allocate(kStateN, kStateSegments);
    Weights<float> wa(random_values(kStateN, 12));
    for (int s = 0; s < 3; ++s) wa.step(*a, 2.0f, state_gradient(s));
    // Through text, as a checkpoint file would carry the header.
    b->load_state(json::parse(a->state_header().dump()), a->state_data());
    EXPECT_EQ(b->state_header(), a->state_header());
    EXPECT_EQ(b->state_data(), a->state_data());
    EXPECT_EQ(b->step_count(), a->step_count());
    EXPECT_EQ(b->learning_rate(), a->learning_rate());
    Weights<float> wb = wa;
    for (int s = 3; s < 6; ++s) {
      wa.step(*a, 2.0f, state_gradient(s));
      wb.step(*b, 2.0f, state_gradient(s));
    }
    EXPECT_EQ(wa.master, wb.master);
    EXPECT_EQ(b->state_data(), a->state_data());
    EXPECT_EQ(b->learning_rate(), a->learning_rate());
    if (a->has_inference_params()) {
      std::vector<double> ia(kStateN), ib(kStateN);
      a->write_inference_params(TensorView::vector(ia.data(), static_cast<int64_t>(kStateN)));
      b->write_inference_params(TensorView::vector(ib.data(), static_cast<int64_t>(kStateN)));
      EXPECT_EQ(ia, ib);
    }
  }
}

TEST(OptimizerState, AdamStepCountersAboveSixteenBitsSurvive) {
  auto a = make(json::object()), b = make(json::object());
  a->allocate(2, {});
  b->allocate(2, {});
  json header = a->state_header();
  std::vector<float> data = a->state_data();  // [m m | v v | lo lo | hi hi]
  header["current_step"] = 70000;
  data[4] = 70000 % 65536;
  data[6] = 70000 / 65536;
  data[5] = 3;
  b->load_state(header, data);
  EXPECT_EQ(b->state_data(), data);
  EXPECT_EQ(b->step_count(), 70000u);
}

TEST(OptimizerState, MismatchesThrowAndLeaveStateUnchanged) {
  for (const json& config : state_configs()) {
    SCOPED_TRACE(config.dump());
    auto a = make(config), b = make(config);
    a->allocate(kStateN, kStateSegments);
    b->allocate(kStateN, kStateSegments);
    Weights<float> wa(random_values(kStateN, 13)), wb(random_values(kStateN, 14));
    for (int s = 0; s < 2; ++s) wa.step(*a, 1.0f, state_gradient(s));
    wb.step(*b, 1.0f, state_gradient(7));
    const json header = a->state_header(), b_header = b->state_header();
    const std::vector<float> data = a->state_data(), b_data = b->state_data();
    auto expect_rejected = [&](const json& h, const std::vector<float>& d, const std::string& what) {
      EXPECT_THROW(b->load_state(h, d), Error) << what;
      EXPECT_EQ(b->state_header(), b_header) << what;
      EXPECT_EQ(b->state_data(), b_data) << what;
    };
    std::vector<float> shorter = data;
    shorter.push_back(0.0f);
    expect_rejected(header, shorter, "size + 1");
    json wrong_n = header;
    wrong_n["n_params"] = kStateN + 1;
    expect_rejected(wrong_n, data, "n_params");
    json wrong_otype = header;
    wrong_otype["otype"] = header["otype"] == "SGD" ? "Adam" : "SGD";
    expect_rejected(wrong_otype, data, "otype");
    expect_rejected(json::array(), data, "not an object");

    // A state from a differently sized model.
    auto c = make(config);
    c->allocate(kStateN, kStateSegments);
    EXPECT_NO_THROW(c->load_state(header, data));
    if (config.at("otype") != "Composite") {  // (a Composite's counts fix its size)
      auto d = make(config);
      d->allocate(kStateN + 2, {});
      EXPECT_THROW(d->load_state(header, data), Error);
    }
  }
}

TEST(OptimizerState, CompositeRejectsAllOrNothing) {
  const json config = state_configs().back();
  auto a = make(config), b = make(config);
  a->allocate(kStateN, kStateSegments);
  b->allocate(kStateN, kStateSegments);
  Weights<float> wa(random_values(kStateN, 15));
  for (int s = 0; s < 2; ++s) wa.step(*a, 1.0f, state_gradient(s));
  const std::vector<float> b_data = b->state_data();
  // The first nested state (Adam) is fine; break the EMA average at the very end.
  std::vector<float> data = a->state_data();
  data.back() = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(b->load_state(a->state_header(), data), Error);
  EXPECT_EQ(b->state_data(), b_data);
  EXPECT_EQ(b->step_count(), 0u);
  // A broken Adam step counter (not an integer) is caught too.
  auto adam = make(json::object());
  adam->allocate(2, {});
  std::vector<float> bad = adam->state_data();
  bad[4] = 1.5f;
  try {
    adam->load_state(adam->state_header(), bad);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("left unchanged"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tinyfuse
