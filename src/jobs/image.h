// An RGB image of floats in [0, 1], and sampling it at continuous positions. Reading and writing
// image files is the CLI's (tools/cli/image_files.h): the jobs' pictures need no file formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tinyfuse::jobs {

struct Image {
  int width = 0, height = 0;
  std::vector<float> rgb;  // row-major from the top row, 3 values per pixel

  Image() = default;
  Image(int w, int h, float fill = 0.0f) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3, fill) {}
  float* pixel(int x, int y) { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
  const float* pixel(int x, int y) const { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
};

// Colours at `n` positions xy (x, y pairs in [0, 1]^2, x rightwards, y downwards) by bilinear
// interpolation between pixel centres, clamped at the borders. Writes n RGB triples to `rgb`.
void sample_bilinear(const Image& image, const float* xy, int64_t n, float* rgb);

}  // namespace tinyfuse::jobs
