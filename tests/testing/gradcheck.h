// Finite-difference checks of a DifferentiableObject built in the FP64 reference mode.
// gradcheck: the scalar checked is L = sum(w * y) over the real output columns, with fixed random
// weights w, so dL/dy = w and every output element contributes.
// gradgradcheck: second derivatives (backward_backward_input) against differences of the first.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tinyfuse/tinyfuse.h"

namespace tinyfuse::testing {

inline std::vector<double> random_vector(Pcg32& rng, size_t n, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.next_double();
  return v;
}

struct GradcheckResult {
  double max_input_error = 0, max_param_error = 0;
  size_t n_checked = 0;
};

// Relative error with an absolute floor so tiny gradients are compared absolutely.
inline double grad_error(double analytic, double numeric) {
  return std::abs(analytic - numeric) / std::max(1.0, std::abs(numeric));
}

// Checks up to `max_checks` randomly chosen input and parameter entries (all of them if fewer).
inline GradcheckResult gradcheck(DifferentiableObject& object, int64_t batch, Pcg32& rng, float param_scale = 1.0f,
                                 size_t max_checks = 24, double h = 1e-6) {
  const int64_t in_w = object.input_width(), out_w = object.padded_output_width(), real_w = object.output_width();
  std::vector<double> input = random_vector(rng, batch * in_w);
  std::vector<double> params(object.n_params()), grads(object.n_params(), 0.0);
  {
    std::vector<float> init(object.n_params());
    object.initialize_params(rng, init.data(), param_scale);
    for (size_t i = 0; i < init.size(); ++i) params[i] = init[i];
  }
  // Biases start at zero; give them random values so their gradient paths are exercised.
  for (const auto& seg : object.param_segments())
    if (seg.kind == ParamSegment::Kind::Vector)
      for (size_t i = 0; i < seg.count; ++i) params[seg.offset + i] = 0.1 * (2 * rng.next_double() - 1);
  std::vector<double> weights = random_vector(rng, batch * out_w);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t d = real_w; d < out_w; ++d) weights[b * out_w + d] = 0;

  auto pview = TensorView::vector(params.data(), static_cast<int64_t>(params.size()));
  auto gview = TensorView::vector(grads.data(), static_cast<int64_t>(grads.size()));
  object.set_params(pview, pview, gview);

  std::vector<double> out(batch * out_w);
  auto in_view = TensorView::matrix(input.data(), batch, in_w);
  auto out_view = TensorView::matrix(out.data(), batch, out_w);
  auto loss = [&]() {
    object.inference(in_view, out_view);
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += weights[i] * out[i];
    return s;
  };

  auto ctx = object.forward(in_view, &out_view, false, true);
  std::vector<double> d_input(batch * in_w, 0.0);
  auto din_view = TensorView::matrix(d_input.data(), batch, in_w);
  auto w_view = TensorView::matrix(weights.data(), batch, out_w);
  object.backward(*ctx, in_view, out_view, w_view, &din_view, false, GradientMode::Overwrite);

  GradcheckResult result;
  auto pick = [&](size_t n) {
    std::vector<size_t> idx;
    if (n <= max_checks) {
      for (size_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
      for (size_t i = 0; i < max_checks; ++i) idx.push_back(rng.next_uint() % n);
    }
    return idx;
  };
  for (size_t i : pick(input.size())) {
    const double saved = input[i];
    input[i] = saved + h;
    const double up = loss();
    input[i] = saved - h;
    const double down = loss();
    input[i] = saved;
    result.max_input_error = std::max(result.max_input_error, grad_error(d_input[i], (up - down) / (2 * h)));
    ++result.n_checked;
  }
  for (size_t i : pick(params.size())) {
    const double saved = params[i];
    params[i] = saved + h;
    const double up = loss();
    params[i] = saved - h;
    const double down = loss();
    params[i] = saved;
    result.max_param_error = std::max(result.max_param_error, grad_error(grads[i], (up - down) / (2 * h)));
    ++result.n_checked;
  }
  return result;
}

// ---- Second derivatives ----------------------------------------------------------------------
//
// L2 = sum(v * dL/dinput), dL/dinput being backward()'s input gradient for dL/doutput = g, with
// fixed random v and g (every output column, padding included: dL/dinput depends on all of them).
// backward_backward_input(v, g) gives dL2/dg, dL2/dparams and dL2/dinput; each is compared with
// central differences of L2. L2 is linear in g, so its differences are exact up to rounding. Rows
// are independent, so a perturbed input or g entry is differenced on its row alone (a batch of
// 1000 is checked as precisely as one of 1); parameters are differenced on the whole batch.

struct SecondOrderOptions {
  float param_scale = 1.0f;
  size_t max_checks = 16;  // per quantity
  double h = 1e-6;         // step for inputs and parameters
  double lo = -1, hi = 1;  // input range
  double grid_jitter = 0;  // added uniformly to Grid parameters (initialised tiny, they would hardly matter)
};

struct SecondOrderResult {
  double max_doutput_error = 0, max_param_error = 0, max_input_error = 0;
  double largest_doutput = 0, largest_param = 0, largest_input = 0;  // of the analytic values
  size_t n_checked = 0;
};

inline SecondOrderResult gradgradcheck(DifferentiableObject& object, int64_t batch, Pcg32& rng,
                                       const SecondOrderOptions& o = {}) {
  const int64_t in_w = object.input_width(), out_w = object.padded_output_width();
  std::vector<double> x = random_vector(rng, batch * in_w, o.lo, o.hi);
  std::vector<double> params(object.n_params()), grads(object.n_params(), NAN);
  {
    std::vector<float> init(object.n_params());
    object.initialize_params(rng, init.data(), o.param_scale);
    for (size_t i = 0; i < init.size(); ++i) params[i] = init[i];
  }
  for (const auto& seg : object.param_segments())
    if (seg.kind == ParamSegment::Kind::Vector)
      for (size_t i = 0; i < seg.count; ++i) params[seg.offset + i] = 0.1 * (2 * rng.next_double() - 1);
    else if (seg.kind == ParamSegment::Kind::Grid)
      for (size_t i = 0; i < seg.count; ++i) params[seg.offset + i] += o.grid_jitter * (2 * rng.next_double() - 1);
  const std::vector<double> g = random_vector(rng, batch * out_w), v = random_vector(rng, batch * in_w);
  auto pview = TensorView::vector(params.data(), static_cast<int64_t>(params.size()));
  auto gview = TensorView::vector(grads.data(), static_cast<int64_t>(grads.size()));
  object.set_params(pview, pview, gview);

  // L2 over rows [r0, r0 + n) of (x, g) with their v.
  std::vector<double> gg = g;
  auto l2 = [&](int64_t r0, int64_t n) {
    std::vector<double> out(n * out_w), dx(n * in_w);
    auto xv = TensorView::matrix(x.data() + r0 * in_w, n, in_w);
    auto ov = TensorView::matrix(out.data(), n, out_w);
    auto dxv = TensorView::matrix(dx.data(), n, in_w);
    auto ctx = object.forward(xv, &ov, false, true);
    object.backward(*ctx, xv, ov, TensorView::matrix(gg.data() + r0 * out_w, n, out_w), &dxv, false, GradientMode::Ignore);
    double s = 0;
    for (int64_t i = 0; i < n * in_w; ++i) s += v[r0 * in_w + i] * dx[i];
    return s;
  };

  std::vector<double> out(batch * out_w), d_g(batch * out_w, NAN), d_x(batch * in_w, NAN);
  auto xv = TensorView::matrix(x.data(), batch, in_w);
  auto ov = TensorView::matrix(out.data(), batch, out_w);
  auto d_gv = TensorView::matrix(d_g.data(), batch, out_w), d_xv = TensorView::matrix(d_x.data(), batch, in_w);
  {
    auto ctx = object.forward(xv, &ov, false, true);
    object.backward_backward_input(*ctx, xv, TensorView::matrix(const_cast<double*>(v.data()), batch, in_w),
                                   TensorView::matrix(gg.data(), batch, out_w), &d_gv, &d_xv, false,
                                   GradientMode::Overwrite);
  }

  SecondOrderResult r;
  auto pick = [&](size_t n) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < std::min(n, o.max_checks); ++i) idx.push_back(n <= o.max_checks ? i : rng.next_uint() % n);
    return idx;
  };
  auto central = [&](double& e, double h, auto&& f) {
    const double saved = e;
    e = saved + h;
    const double up = f();
    e = saved - h;
    const double down = f();
    e = saved;
    return (up - down) / (2 * h);
  };
  for (double a : d_g) r.largest_doutput = std::max(r.largest_doutput, std::abs(a));
  for (double a : d_x) r.largest_input = std::max(r.largest_input, std::abs(a));
  for (size_t i : pick(gg.size())) {
    const int64_t row = static_cast<int64_t>(i) / out_w;
    r.max_doutput_error = std::max(r.max_doutput_error, grad_error(d_g[i], central(gg[i], 1e-3, [&] { return l2(row, 1); })));
    ++r.n_checked;
  }
  for (size_t i : pick(x.size())) {
    const int64_t row = static_cast<int64_t>(i) / in_w;
    r.max_input_error = std::max(r.max_input_error, grad_error(d_x[i], central(x[i], o.h, [&] { return l2(row, 1); })));
    ++r.n_checked;
  }
  // Half the parameters checked among those with a second-order gradient (a grid's table is
  // mostly untouched by a small batch), half anywhere.
  std::vector<size_t> touched;
  for (size_t i = 0; i < grads.size(); ++i) {
    r.largest_param = std::max(r.largest_param, std::abs(grads[i]));
    if (grads[i] != 0) touched.push_back(i);
  }
  std::vector<size_t> param_picks = pick(params.size());
  for (size_t k = 1; k < param_picks.size() && !touched.empty(); k += 2) param_picks[k] = touched[rng.next_uint() % touched.size()];
  for (size_t i : param_picks) {
    r.max_param_error =
        std::max(r.max_param_error, grad_error(grads[i], central(params[i], o.h, [&] { return l2(0, batch); })));
    ++r.n_checked;
  }
  for (double a : grads)
    if (!std::isfinite(a)) r.max_param_error = INFINITY;  // Overwrite writes every gradient
  for (double a : d_g)
    if (!std::isfinite(a)) r.max_doutput_error = INFINITY;
  for (double a : d_x)
    if (!std::isfinite(a)) r.max_input_error = INFINITY;
  return r;
}

}  // namespace tinyfuse::testing
