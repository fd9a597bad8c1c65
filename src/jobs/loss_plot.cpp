#include "jobs/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "jobs/text.h"

namespace tinyfuse::jobs {

namespace {

constexpr float kAxis[3] = {0.15f, 0.15f, 0.15f};
constexpr float kGrid[3] = {0.88f, 0.88f, 0.88f};
constexpr float kRaw[3] = {0.66f, 0.78f, 0.96f};
constexpr float kMean[3] = {0.05f, 0.25f, 0.65f};
constexpr int kFontScale = 2;

void put(Image& img, int x, int y, const float* rgb) {
  if (x >= 0 && y >= 0 && x < img.width && y < img.height) std::copy(rgb, rgb + 3, img.pixel(x, y));
}

void fill_rect(Image& img, int x0, int y0, int x1, int y1, const float* rgb) {
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) put(img, x, y, rgb);
}

// A line of `thickness` pixels, stamped along a DDA walk.
void draw_line(Image& img, float xa, float ya, float xb, float yb, int thickness, const float* rgb) {
  const int n = static_cast<int>(std::ceil(std::max(std::fabs(xb - xa), std::fabs(yb - ya)))) + 1;
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  for (int i = 0; i <= n; ++i) {
    const float t = static_cast<float>(i) / static_cast<float>(n);
    const int x = static_cast<int>(std::lround(xa + (xb - xa) * t));
    const int y = static_cast<int>(std::lround(ya + (yb - ya) * t));
    for (int dy = lo; dy <= hi; ++dy)
      for (int dx = lo; dx <= hi; ++dx) put(img, x + dx, y + dy, rgb);
  }
}

// Tick spacing of 1, 2 or 5 times a power of ten giving at most about `max_ticks` ticks over `range`.
double nice_spacing(double range, int max_ticks) {
  const double raw = range / max_ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10.0 * mag;
}

std::string format_step(double v) {
  char buf[32];
  if (v >= 1e6 && std::fmod(v, 1e5) == 0)
    std::snprintf(buf, sizeof(buf), "%gM", v / 1e6);
  else if (v >= 1e4 && std::fmod(v, 1e3) == 0)
    std::snprintf(buf, sizeof(buf), "%gk", v / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  return buf;
}

}  // namespace

Image render_loss_plot(const std::vector<float>& losses, int width, int height) {
  Image img(width, height, 1.0f);
  const int left = 70, right = width - 24, top = 36, bottom = height - 48;
  const int plot_w = right - left, plot_h = bottom - top;
  const size_t n = losses.size();

  float lo = INFINITY, hi = 0;
  for (float v : losses)
    if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  const bool has_data = hi > 0;
  int dec_lo = has_data ? static_cast<int>(std::floor(std::log10(lo))) : -3;
  int dec_hi = has_data ? static_cast<int>(std::ceil(std::log10(hi))) : 0;
  if (dec_hi <= dec_lo) dec_hi = dec_lo + 1;
  const auto y_of = [&](double log_v) {
    return static_cast<float>(bottom - (log_v - dec_lo) / (dec_hi - dec_lo) * plot_h);
  };
  const double x_range = std::max<double>(1.0, static_cast<double>(n));
  const auto x_of = [&](double step) { return static_cast<float>(left + step / x_range * plot_w); };

  // Grid, ticks and labels of the y axis: every decade, minor ticks at 2..9 times it.
  const int label_every = (dec_hi - dec_lo + 7) / 8;
  for (int d = dec_lo; d <= dec_hi; ++d) {
    const int y = static_cast<int>(std::lround(y_of(d)));
    fill_rect(img, left + 1, y, right, y + 1, kGrid);
    fill_rect(img, left - 8, y, left, y + 1, kAxis);
    if ((d - dec_lo) % label_every == 0) {
      const std::string label = "1e" + std::to_string(d);
      draw_text(img, left - 12 - text_width(label) * kFontScale, y - 7, label, kFontScale, kAxis);
    }
    if (d < dec_hi)
      for (int m = 2; m <= 9; ++m) {
        const int ym = static_cast<int>(std::lround(y_of(d + std::log10(static_cast<double>(m)))));
        fill_rect(img, left - 4, ym, left, ym + 1, kAxis);
      }
  }
  // x axis: steps, at a 1-2-5 spacing.
  const double spacing = nice_spacing(x_range, 8);
  for (double s = 0; s <= x_range + 1e-9; s += spacing) {
    const int x = static_cast<int>(std::lround(x_of(s)));
    if (s > 0) fill_rect(img, x, top, x + 1, bottom, kGrid);
    fill_rect(img, x, bottom, x + 1, bottom + 6, kAxis);
    const std::string label = format_step(s);
    draw_text(img, x - text_width(label) * kFontScale / 2, bottom + 10, label, kFontScale, kAxis);
  }

  if (has_data) {
    // Each step's loss, then a running mean of log(loss) over about 1% of the run.
    const auto draw_series = [&](auto value_of, int thickness, const float* rgb) {
      bool have_prev = false;
      float px = 0, py = 0;
      for (size_t i = 0; i < n; ++i) {
        const double lv = value_of(i);
        if (!std::isfinite(lv)) {
          have_prev = false;
          continue;
        }
        const float x = x_of(static_cast<double>(i + 1)), y = y_of(lv);
        if (have_prev) draw_line(img, px, py, x, y, thickness, rgb);
        else draw_line(img, x, y, x, y, thickness, rgb);
        px = x, py = y, have_prev = true;
      }
    };
    std::vector<double> logs(n, NAN);
    for (size_t i = 0; i < n; ++i)
      if (std::isfinite(losses[i]) && losses[i] > 0) logs[i] = std::log10(static_cast<double>(losses[i]));
    draw_series([&](size_t i) { return logs[i]; }, 1, kRaw);

    const size_t half = std::max<size_t>(1, n / 200);
    std::vector<double> prefix(n + 1, 0.0), count(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const bool ok = std::isfinite(logs[i]);
      prefix[i + 1] = prefix[i] + (ok ? logs[i] : 0.0);
      count[i + 1] = count[i] + (ok ? 1.0 : 0.0);
    }
    draw_series(
        [&](size_t i) {
          const size_t a = i >= half ? i - half : 0, b = std::min(n, i + half + 1);
          const double c = count[b] - count[a];
          return c > 0 ? (prefix[b] - prefix[a]) / c : NAN;
        },
        2, kMean);
  } else {
    draw_text(img, left + plot_w / 2 - text_width("no data") * kFontScale / 2, top + plot_h / 2, "no data", kFontScale,
              kAxis);
  }

  // Axes on top, then titles.
  fill_rect(img, left, top, left + 1, bottom + 1, kAxis);
  fill_rect(img, left, bottom, right, bottom + 1, kAxis);
  draw_text(img, left, 10, "training loss (log scale)", kFontScale, kAxis);
  draw_text(img, left + plot_w / 2 - text_width("step") * kFontScale / 2, bottom + 28, "step", kFontScale, kAxis);
  return img;
}

}  // namespace tinyfuse::jobs
