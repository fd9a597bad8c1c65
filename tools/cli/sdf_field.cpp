#include "sdf_field.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "jobs/text.h"
#include "staging.h"

namespace tinyfuse::cli {

namespace {

constexpr int64_t kChunkRows = int64_t{1} << 15;

// Pads a chunk to the model's batch granularity; the padded rows repeat the last point.
int64_t padded_rows(const DifferentiableObject& model, int64_t rows) {
  const int64_t g = std::max<int64_t>(1, model.batch_granularity());
  return (rows + g - 1) / g * g;
}

}  // namespace

std::vector<float> sdf_values(DifferentiableObject& model, const float* points, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  const int64_t width = model.padded_output_width(), capacity = padded_rows(model, std::min(n, kChunkRows));
  StagedMatrix input(capacity, 3, model.input_dtype(), model.device());
  StagedMatrix output(capacity, width, model.output_dtype(), model.device());
  for (int64_t begin = 0; begin < n; begin += kChunkRows) {
    const int64_t rows = std::min(kChunkRows, n - begin), padded = padded_rows(model, rows);
    std::copy(points + 3 * begin, points + 3 * (begin + rows), input.host());
    for (int64_t r = rows; r < padded; ++r) std::copy(points + 3 * (begin + rows - 1), points + 3 * (begin + rows), input.host() + 3 * r);
    model.inference(input.upload(padded), output.device_view(padded));
    output.download(padded);
    for (int64_t r = 0; r < rows; ++r) values[begin + r] = output.host()[r * width];
  }
  return values;
}

std::vector<float> sdf_gradients(DifferentiableObject& model, const float* points, int64_t n) {
  std::vector<float> gradients(static_cast<size_t>(3 * n));
  const int64_t width = model.padded_output_width(), capacity = padded_rows(model, std::min(n, kChunkRows));
  StagedMatrix input(capacity, 3, model.input_dtype(), model.device());
  StagedMatrix output(capacity, width, model.output_dtype(), model.device());
  StagedMatrix ones(capacity, width, model.output_dtype(), model.device());
  StagedMatrix grad(capacity, 3, model.input_dtype(), model.device());
  for (int64_t r = 0; r < capacity; ++r)
    for (int64_t j = 0; j < width; ++j) ones.host()[r * width + j] = j == 0 ? 1.0f : 0.0f;
  for (int64_t begin = 0; begin < n; begin += kChunkRows) {
    const int64_t rows = std::min(kChunkRows, n - begin), padded = padded_rows(model, rows);
    std::copy(points + 3 * begin, points + 3 * (begin + rows), input.host());
    for (int64_t r = rows; r < padded; ++r) std::copy(points + 3 * (begin + rows - 1), points + 3 * (begin + rows), input.host() + 3 * r);
    const TensorView x = input.upload(padded), y = output.device_view(padded), g = grad.device_view(padded);
    auto ctx = model.forward(x, &y, /*use_inference_params=*/true, /*prepare_input_gradients=*/true);
    model.backward(*ctx, x, y, ones.upload(padded), &g, true, GradientMode::Ignore);
    grad.download(padded);
    std::copy(grad.host(), grad.host() + 3 * rows, gradients.begin() + 3 * begin);
  }
  return gradients;
}

jobs::Image render_sdf_slices(DifferentiableObject& model, const SdfSource& source, int size) {
  constexpr int kGap = 8, kHeader = 28, kFont = 2;
  // Per panel: the fixed axis and its value, then the axes that run right and up.
  struct Panel {
    int fixed, right, up;
    const char* label;
  };
  const Panel panels[3] = {{2, 0, 1, "z = 0.5 (x right, y up)"}, {1, 0, 2, "y = 0.5 (x right, z up)"},
                           {0, 2, 1, "x = 0.5 (z right, y up)"}};
  jobs::Image image(3 * size + 4 * kGap, size + kHeader + kGap, 1.0f);
  const int64_t per_panel = static_cast<int64_t>(size) * size;
  std::vector<float> points(static_cast<size_t>(3 * 3 * per_panel));
  for (int p = 0; p < 3; ++p)
    for (int row = 0; row < size; ++row)
      for (int col = 0; col < size; ++col) {
        float* q = &points[3 * (p * per_panel + static_cast<int64_t>(row) * size + col)];
        q[panels[p].fixed] = 0.5f;
        q[panels[p].right] = (static_cast<float>(col) + 0.5f) / static_cast<float>(size);
        q[panels[p].up] = 1.0f - (static_cast<float>(row) + 0.5f) / static_cast<float>(size);
      }
  const std::vector<float> learned = sdf_values(model, points.data(), 3 * per_panel);
  std::vector<float> exact;
  if (source.has_exact_sdf()) {
    exact.resize(learned.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      const double q[3] = {points[3 * i], points[3 * i + 1], points[3 * i + 2]};
      exact[i] = static_cast<float>(source.exact_sdf(q));
    }
  }
  // A pixel is on a zero level set when its sign differs from a 4-neighbour's.
  auto on_level_set = [&](const std::vector<float>& d, int p, int row, int col) {
    const float v = d[p * per_panel + static_cast<int64_t>(row) * size + col];
    const int dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
    for (int k = 0; k < 4; ++k) {
      const int r = row + dr[k], c = col + dc[k];
      if (r < 0 || c < 0 || r >= size || c >= size) continue;
      if ((d[p * per_panel + static_cast<int64_t>(r) * size + c] < 0) != (v < 0)) return true;
    }
    return false;
  };
  const float black[3] = {0, 0, 0}, white[3] = {1, 1, 1}, ink[3] = {0.15f, 0.15f, 0.15f};
  for (int p = 0; p < 3; ++p) {
    const int x0 = kGap + p * (size + kGap), y0 = kHeader;
    jobs::draw_text(image, x0, 6, panels[p].label, kFont, ink);
    for (int row = 0; row < size; ++row)
      for (int col = 0; col < size; ++col) {
        const float d = learned[p * per_panel + static_cast<int64_t>(row) * size + col];
        float* px = image.pixel(x0 + col, y0 + row);
        if (!std::isfinite(d)) {
          std::fill(px, px + 3, 0.5f);
          continue;
        }
        const float outside[3] = {0.95f, 0.6f, 0.25f}, inside[3] = {0.3f, 0.55f, 0.95f};
        const float* base = d >= 0 ? outside : inside;
        const float shade = (1.0f - std::exp(-8.0f * std::abs(d))) * (0.85f + 0.15f * std::cos(2.0f * 3.14159265f * d / 0.04f));
        for (int k = 0; k < 3; ++k) px[k] = 0.25f + 0.75f * base[k] * shade;
        if (!exact.empty() && on_level_set(exact, p, row, col)) std::copy(white, white + 3, px);
        if (on_level_set(learned, p, row, col)) std::copy(black, black + 3, px);
      }
  }
  return image;
}

}  // namespace tinyfuse::cli
