#include "reconstruct.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "staging.h"

namespace tinyfuse::cli {

Image render_model(DifferentiableObject& model, int width, int height) {
  const int64_t n = static_cast<int64_t>(width) * height;
  const int64_t chunk = std::min<int64_t>(n, int64_t(1) << 16);
  const int64_t out_width = model.padded_output_width();
  StagedMatrix input(chunk, 2, model.input_dtype(), model.device());
  StagedMatrix output(chunk, out_width, model.output_dtype(), model.device());
  Image image(width, height);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t rows = std::min(chunk, n - begin);
    float* xy = input.host();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t p = begin + i;
      xy[2 * i] = (static_cast<float>(p % width) + 0.5f) / static_cast<float>(width);
      xy[2 * i + 1] = (static_cast<float>(p / width) + 0.5f) / static_cast<float>(height);
    }
    model.inference(input.upload(rows), output.device_view(rows));
    output.download(rows);
    const float* out = output.host();
    for (int64_t i = 0; i < rows; ++i)
      std::copy(out + i * out_width, out + i * out_width + 3, &image.rgb[static_cast<size_t>(begin + i) * 3]);
  }
  return image;
}

double psnr(const Image& image, const Image& reference) {
  if (image.width != reference.width || image.height != reference.height)
    throw std::logic_error("psnr: images of different sizes");
  double sum = 0;
  for (size_t i = 0; i < image.rgb.size(); ++i) {
    const float v = std::isfinite(image.rgb[i]) ? std::clamp(image.rgb[i], 0.0f, 1.0f) : 0.0f;
    const double d = static_cast<double>(v) - reference.rgb[i];
    sum += d * d;
  }
  const double mse = image.rgb.empty() ? 0.0 : sum / static_cast<double>(image.rgb.size());
  return mse > 0 ? 10.0 * std::log10(1.0 / mse) : std::numeric_limits<double>::infinity();
}

}  // namespace tinyfuse::cli
