// Whole views to and from host doubles, for GPU tests (FP16 / BF16 / FP32 -> double is exact, so
// bitwise comparisons on the host see the device's bits). 1-D views are one row.
#pragma once

#include <vector>

#include "tinyfuse/tinyfuse.h"

namespace tinyfuse::testing {

inline std::vector<double> download(const TensorView& t) {
  std::vector<double> host(static_cast<size_t>(t.numel()));
  copy_tensor(t.ndim == 1 ? TensorView::vector(host.data(), t.numel()) : TensorView::matrix(host.data(), t.rows(), t.cols()), t);
  return host;
}

inline void upload(const TensorView& dst, std::vector<double> host) {
  copy_tensor(dst, dst.ndim == 1 ? TensorView::vector(host.data(), dst.numel())
                                 : TensorView::matrix(host.data(), dst.rows(), dst.cols()));
}

}  // namespace tinyfuse::testing
