// Finite-difference checks of a DifferentiableObject built in the FP64 reference mode.
// The scalar checked is L = sum(w * y) over the real output columns, with fixed random weights w,
// so dL/dy = w and every output element contributes.
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

}  // namespace tinyfuse::testing
