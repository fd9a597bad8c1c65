// A device matrix for GPU tests: `rows x cols` elements of one dtype. With `strided`, `view` is a
// column slice starting one element into a wider matrix: rows further apart than their width and
// pointers only element-aligned (what networks must stage). `whole` is the full matrix, for
// poisoning and for checking that nothing outside the view was written.
#pragma once

#include <algorithm>
#include <limits>

#include "tinyfuse/tinyfuse.h"

namespace tinyfuse::testing {

struct DeviceMatrix {
  Buffer buffer;
  TensorView whole, view;
  DeviceMatrix(DType p, int64_t rows, int64_t cols, bool strided) : DeviceMatrix(p, rows, cols, strided ? 3 : 0, strided ? 1 : 0) {}
  // `view` starts `offset` elements into rows `cols + pad` elements long.
  DeviceMatrix(DType p, int64_t rows, int64_t cols, int64_t pad, int64_t offset) {
    buffer = Buffer(Device::CUDA, std::max<size_t>(1, static_cast<size_t>(rows * (cols + pad)) * dtype_size(p)));
    whole = buffer.matrix(p, rows, cols + pad);
    view = pad ? whole.cols_slice(offset, cols) : whole;
  }
  void poison() { fill_tensor(whole, std::numeric_limits<double>::quiet_NaN()); }
};

}  // namespace tinyfuse::testing
