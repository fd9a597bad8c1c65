#include "reconstruct.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include "staging.h"

namespace tinyfuse::cli {

jobs::Image render_model(DifferentiableObject& model, int width, int height, int64_t max_chunk) {
  const int64_t n = static_cast<int64_t>(width) * height;
  const int64_t out_width = model.padded_output_width();
  jobs::Image image(width, height);
  int64_t chunk = std::max<int64_t>(1, std::min(n, max_chunk));
  std::unique_ptr<StagedMatrix> input, output;
  for (int64_t begin = 0; begin < n;) {
    const int64_t rows = std::min(chunk, n - begin);
    try {
      if (!input) {
        input = std::make_unique<StagedMatrix>(chunk, 2, model.input_dtype(), model.device());
        output = std::make_unique<StagedMatrix>(chunk, out_width, model.output_dtype(), model.device());
      }
      float* xy = input->host();
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t p = begin + i;
        xy[2 * i] = (static_cast<float>(p % width) + 0.5f) / static_cast<float>(width);
        xy[2 * i + 1] = (static_cast<float>(p / width) + 0.5f) / static_cast<float>(height);
      }
      model.inference(input->upload(rows), output->device_view(rows));
      output->download(rows);
    } catch (const OutOfMemoryError&) {
      // Nothing was changed (docs/ERRORS.md): the same rows again in smaller chunks.
      if (chunk == 1) throw;
      chunk = (chunk + 1) / 2;
      input.reset();
      output.reset();
      continue;
    }
    const float* out = output->host();
    for (int64_t i = 0; i < rows; ++i)
      std::copy(out + i * out_width, out + i * out_width + 3, &image.rgb[static_cast<size_t>(begin + i) * 3]);
    begin += rows;
  }
  return image;
}

double psnr(const jobs::Image& image, const jobs::Image& reference) {
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
