// A small bitmap font (stb_easy_font) for the labels in the jobs' pictures.
#pragma once

#include <string>
#include <vector>

#include "jobs/image.h"

namespace tinyfuse::jobs {

// An axis-aligned rectangle [x0, x1) x [y0, y1).
struct Rect {
  float x0, y0, x1, y1;
};

// The strokes of `text` (one line, printable ASCII; anything else shows as '?') as rectangles in
// font units, origin at the top-left, y downwards. Capitals are about 7 units tall.
std::vector<Rect> text_rects(const std::string& text);
// Advance width of `text` in font units.
int text_width(const std::string& text);
constexpr int kTextHeight = 8;

// Draws `text` with its top-left corner at pixel (x, y), each font unit `scale` pixels wide.
void draw_text(Image& image, int x, int y, const std::string& text, int scale, const float rgb[3]);

}  // namespace tinyfuse::jobs
