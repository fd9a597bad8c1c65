#include "eikonal_loss.h"

#include <cmath>

namespace tinyfuse::cli {

EikonalLossValue eikonal_loss(int64_t n_surface, int64_t n, const float* f, int64_t f_stride, const float* grad,
                              const float* normals, const EikonalWeights& w, float scale, float* dL_df,
                              float* dL_dgrad) {
  EikonalLossValue v;
  const int64_t n_eikonal = n - n_surface;
  const double per_surface = n_surface > 0 ? 1.0 / static_cast<double>(n_surface) : 0.0;
  const double per_eikonal = n_eikonal > 0 ? 1.0 / static_cast<double>(n_eikonal) : 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const float* g = grad + 3 * r;
    float* dg = dL_dgrad + 3 * r;
    const double norm = std::sqrt(double(g[0]) * g[0] + double(g[1]) * g[1] + double(g[2]) * g[2]);
    if (r < n_surface) {
      const double value = f[r * f_stride];
      v.surface += std::abs(value) * per_surface;
      dL_df[r * f_stride] = static_cast<float>(scale * w.surface * per_surface * (value > 0 ? 1.0 : value < 0 ? -1.0 : 0.0));
      // 1 - cos = 1 - g.n / |g|; d/dg = -(n / |g| - (g.n) g / |g|^3).
      const float* nr = normals + 3 * r;
      const double dot = g[0] * double(nr[0]) + g[1] * double(nr[1]) + g[2] * double(nr[2]);
      v.normal += (norm > 0 ? 1.0 - dot / norm : 1.0) * per_surface;
      for (int k = 0; k < 3; ++k)
        dg[k] = norm > 0 ? static_cast<float>(-scale * w.normal * per_surface * (nr[k] / norm - dot * g[k] / (norm * norm * norm)))
                         : 0.0f;
    } else {
      dL_df[r * f_stride] = 0.0f;
      v.eikonal += (norm - 1) * (norm - 1) * per_eikonal;
      // d/dg (|g| - 1)^2 = 2 (|g| - 1) g / |g|.
      for (int k = 0; k < 3; ++k)
        dg[k] = norm > 0 ? static_cast<float>(scale * w.eikonal * per_eikonal * 2 * (norm - 1) * g[k] / norm) : 0.0f;
    }
  }
  v.total = w.surface * v.surface + w.eikonal * v.eikonal + w.normal * v.normal;
  return v;
}

}  // namespace tinyfuse::cli
