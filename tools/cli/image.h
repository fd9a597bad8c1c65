// An RGB image of floats in [0, 1], read from and written to PNG/JPEG files, and sampled at
// continuous positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tinyfuse::cli {

struct Image {
  int width = 0, height = 0;
  std::vector<float> rgb;  // row-major from the top row, 3 values per pixel

  Image() = default;
  Image(int w, int h, float fill = 0.0f) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3, fill) {}
  float* pixel(int x, int y) { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
  const float* pixel(int x, int y) const { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
};

// Image files larger than this are refused before they are read.
constexpr uint64_t kMaxImageFileBytes = uint64_t{1} << 30;

// Any format stb_image reads (PNG, JPEG, BMP, TGA, ...); alpha is dropped, 8-bit values map to
// [0, 1] as stored (no colour-space conversion). Only regular files of at most
// kMaxImageFileBytes are read, and a picture whose pixels cannot fit in memory is refused
// (OutOfMemoryError) before it is decoded. Throws std::runtime_error or tinyfuse::Error.
Image load_image(const std::string& path);

// 8-bit RGB PNG (values clamped to [0, 1]), written atomically.
void save_png(const Image& image, const std::string& path);

// Colours at `n` positions xy (x, y pairs in [0, 1]^2, x rightwards, y downwards) by bilinear
// interpolation between pixel centres, clamped at the borders. Writes n RGB triples to `rgb`.
void sample_bilinear(const Image& image, const float* xy, int64_t n, float* rgb);

}  // namespace tinyfuse::cli
