#include "jobs/test_pattern.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "jobs/text.h"

namespace tinyfuse::jobs {

namespace {

constexpr float kPi = 3.14159265358979f;

struct Rgb {
  float r, g, b;
};

Rgb mix(Rgb a, Rgb b, float t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

// Which side of the edge a -> b the point p is on (positive: left, in y-down coordinates right).
float edge(float ax, float ay, float bx, float by, float px, float py) {
  return (bx - ax) * (py - ay) - (by - ay) * (px - ax);
}

class Pattern {
 public:
  Pattern() : text_(text_rects(kWord)) {}

  // Colour at (x, y) in [0, 1]^2, y downwards.
  Rgb at(float x, float y) const {
    Rgb c{0.10f + 0.75f * x, 0.15f + 0.55f * (1.0f - y), 0.35f + 0.5f * y * (1.0f - x)};

    // Rings: phase grows faster than the radius, so the rings get finer towards the rim.
    const float rr = std::hypot(x - 0.28f, y - 0.29f) / 0.24f;
    if (rr < 1.0f) {
      const float wave = 0.5f + 0.5f * std::cos(2.0f * kPi * (4.0f * rr + 4.0f * rr * rr));
      c = mix(Rgb{0.35f, 0.05f, 0.30f}, Rgb{1.0f, 0.97f, 0.90f}, wave);
    }

    // Checkerboard of 1/32-wide squares (8 pixels at 256).
    if (x >= 0.5625f && x < 0.9375f && y >= 0.0625f && y < 0.4375f) {
      const int cx = static_cast<int>(std::floor(x * 32.0f)), cy = static_cast<int>(std::floor(y * 32.0f));
      c = (cx + cy) % 2 ? Rgb{0.98f, 0.85f, 0.10f} : Rgb{0.05f, 0.05f, 0.12f};
    }

    // Red disc with a thin white outline.
    const float rd = std::hypot(x - 0.22f, y - 0.70f);
    if (rd < 0.13f) c = Rgb{0.90f, 0.12f, 0.10f};
    if (std::fabs(rd - 0.13f) < 0.007f) c = Rgb{1.0f, 1.0f, 1.0f};

    // Green triangle.
    const float e0 = edge(0.40f, 0.56f, 0.64f, 0.56f, x, y), e1 = edge(0.64f, 0.56f, 0.52f, 0.82f, x, y),
                e2 = edge(0.52f, 0.82f, 0.40f, 0.56f, x, y);
    if (e0 >= 0 && e1 >= 0 && e2 >= 0) c = Rgb{0.15f, 0.75f, 0.25f};

    // Square of diagonal stripes, period about 8 pixels at 256.
    if (x >= 0.68f && x < 0.95f && y >= 0.52f && y < 0.80f) {
      const float s = (0.866f * x + 0.5f * y) * 32.0f;
      c = s - std::floor(s) < 0.5f ? Rgb{0.10f, 0.85f, 0.90f} : Rgb{0.05f, 0.10f, 0.40f};
    }

    // The word, 3/256 per font unit.
    const float u = (x - kTextX) / kTextUnit, v = (y - kTextY) / kTextUnit;
    if (v >= 0 && v < kTextHeight)
      for (const Rect& r : text_)
        if (u >= r.x0 && u < r.x1 && v >= r.y0 && v < r.y1) c = Rgb{1.0f, 1.0f, 1.0f};
    return c;
  }

 private:
  static constexpr const char* kWord = "tinyfuse";
  static constexpr float kTextX = 0.06f, kTextY = 0.875f, kTextUnit = 3.0f / 256.0f;
  std::vector<Rect> text_;
};

}  // namespace

Image make_test_pattern(int size) {
  constexpr int kSuper = 4;
  const Pattern pattern;
  Image image(size, size);
  for (int py = 0; py < size; ++py)
    for (int px = 0; px < size; ++px) {
      Rgb sum{0, 0, 0};
      for (int sy = 0; sy < kSuper; ++sy)
        for (int sx = 0; sx < kSuper; ++sx) {
          const Rgb c = pattern.at((px + (sx + 0.5f) / kSuper) / size, (py + (sy + 0.5f) / kSuper) / size);
          sum = {sum.r + c.r, sum.g + c.g, sum.b + c.b};
        }
      float* out = image.pixel(px, py);
      out[0] = std::clamp(sum.r / (kSuper * kSuper), 0.0f, 1.0f);
      out[1] = std::clamp(sum.g / (kSuper * kSuper), 0.0f, 1.0f);
      out[2] = std::clamp(sum.b / (kSuper * kSuper), 0.0f, 1.0f);
    }
  return image;
}

}  // namespace tinyfuse::jobs
