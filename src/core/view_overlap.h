// Whether two views' spans of memory meet: loops that write one view while reading the other
// without copying (the CPU's vectorised row loops) take a copying path when they do.
#pragma once

#include <cstdint>
#include <utility>

#include "tinyfuse/tensor.h"

namespace tinyfuse {

inline bool views_overlap(const TensorView& a, const TensorView& b) {
  auto span = [](const TensorView& t) {
    const auto p = reinterpret_cast<uintptr_t>(t.data);
    int64_t last = -1;  // the last element's offset; -1 for an empty view
    if (t.rows() > 0 && t.cols() > 0) last = (t.rows() - 1) * t.strides[0] + (t.cols() - 1) * (t.ndim == 2 ? t.strides[1] : 0);
    return std::pair<uintptr_t, uintptr_t>(p, p + static_cast<uintptr_t>((last + 1) * static_cast<int64_t>(dtype_size(t.dtype))));
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

}  // namespace tinyfuse
