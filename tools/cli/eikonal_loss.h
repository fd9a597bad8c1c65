// The loss learn-sdf trains with, evaluated on the host from the model's values f and input
// gradients grad f at a batch of points:
//   surface * mean over surface points |f|
// + eikonal * mean over the other points (|grad f| - 1)^2
// + normal  * mean over surface points (1 - cos(grad f, n))
// and its gradients with respect to f and to grad f (what backward() and
// backward_backward_input() take).
#pragma once

#include <cstdint>

namespace tinyfuse::cli {

struct EikonalWeights {
  double surface = 1.0, eikonal = 1.0, normal = 0.1;
};

struct EikonalLossValue {
  double surface = 0, eikonal = 0, normal = 0;  // the three means, unweighted
  double total = 0;                             // weighted sum
};

// Rows [0, n_surface) are surface points (normals: n_surface x 3, unit length), rows
// [n_surface, n) eikonal points. f: row r's value at f[r * f_stride]; grad: n x 3. Writes
// dL/df (times `scale`) to dL_df[r * f_stride] (0 for eikonal rows) and dL/d(grad f) (times
// `scale`) to dL_dgrad (n x 3). Where |grad f| is 0 the terms that divide by it give no gradient.
EikonalLossValue eikonal_loss(int64_t n_surface, int64_t n, const float* f, int64_t f_stride, const float* grad,
                              const float* normals, const EikonalWeights& weights, float scale, float* dL_df,
                              float* dL_dgrad);

}  // namespace tinyfuse::cli
