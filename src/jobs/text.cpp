#include "jobs/text.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#include <stb_easy_font.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace tinyfuse::jobs {

namespace {
std::string printable(const std::string& text) {
  std::string s = text;
  for (char& c : s)
    if (c < 32 || c > 126) c = '?';
  return s;
}
}  // namespace

std::vector<Rect> text_rects(const std::string& text) {
  std::string s = printable(text);
  // stb_easy_font writes 4 vertices of 16 bytes per stroke, ~270 bytes per character.
  std::vector<char> vertices(300 * (s.size() + 1));
  const int n_quads = stb_easy_font_print(0, 0, s.data(), nullptr, vertices.data(), static_cast<int>(vertices.size()));
  std::vector<Rect> rects;
  rects.reserve(n_quads);
  for (int q = 0; q < n_quads; ++q) {
    Rect r{1e30f, 1e30f, -1e30f, -1e30f};
    for (int v = 0; v < 4; ++v) {
      float xy[2];
      std::memcpy(xy, vertices.data() + (q * 4 + v) * 16, sizeof(xy));
      r.x0 = std::min(r.x0, xy[0]);
      r.x1 = std::max(r.x1, xy[0]);
      r.y0 = std::min(r.y0, xy[1]);
      r.y1 = std::max(r.y1, xy[1]);
    }
    rects.push_back(r);
  }
  return rects;
}

int text_width(const std::string& text) {
  std::string s = printable(text);
  return stb_easy_font_width(s.data());
}

void draw_text(Image& image, int x, int y, const std::string& text, int scale, const float rgb[3]) {
  for (const Rect& r : text_rects(text)) {
    const int px0 = std::max(0, x + static_cast<int>(std::lround(r.x0 * scale)));
    const int px1 = std::min(image.width, x + static_cast<int>(std::lround(r.x1 * scale)));
    const int py0 = std::max(0, y + static_cast<int>(std::lround(r.y0 * scale)));
    const int py1 = std::min(image.height, y + static_cast<int>(std::lround(r.y1 * scale)));
    for (int py = py0; py < py1; ++py)
      for (int px = px0; px < px1; ++px) std::copy(rgb, rgb + 3, image.pixel(px, py));
  }
}

}  // namespace tinyfuse::jobs
