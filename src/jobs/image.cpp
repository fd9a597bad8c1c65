#include "jobs/image.h"

#include <algorithm>

namespace tinyfuse::jobs {

void sample_bilinear(const Image& image, const float* xy, int64_t n, float* rgb) {
  const int w = image.width, h = image.height;
  for (int64_t i = 0; i < n; ++i) {
    // Pixel (i, j) covers [i, i+1) x [j, j+1) in pixel units; its centre holds its colour.
    const float u = std::clamp(xy[2 * i] * w - 0.5f, 0.0f, static_cast<float>(w - 1));
    const float v = std::clamp(xy[2 * i + 1] * h - 0.5f, 0.0f, static_cast<float>(h - 1));
    const int x0 = std::min(static_cast<int>(u), w - 1), y0 = std::min(static_cast<int>(v), h - 1);
    const int x1 = std::min(x0 + 1, w - 1), y1 = std::min(y0 + 1, h - 1);
    const float fx = u - x0, fy = v - y0;
    const float *p00 = image.pixel(x0, y0), *p10 = image.pixel(x1, y0);
    const float *p01 = image.pixel(x0, y1), *p11 = image.pixel(x1, y1);
    for (int c = 0; c < 3; ++c) {
      const float top = p00[c] + (p10[c] - p00[c]) * fx;
      const float bottom = p01[c] + (p11[c] - p01[c]) * fx;
      rgb[3 * i + c] = top + (bottom - top) * fy;
    }
  }
}

}  // namespace tinyfuse::jobs
