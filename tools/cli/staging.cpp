#include "staging.h"

namespace tinyfuse::cli {

StagedMatrix::StagedMatrix(int64_t rows, int64_t cols, DType dtype, Device device)
    : rows_(rows), cols_(cols), dtype_(dtype), device_(device), host_(static_cast<size_t>(rows * cols)) {
  if (!direct()) buffer_ = Buffer(device, static_cast<size_t>(rows * cols) * dtype_size(dtype));
}

TensorView StagedMatrix::device_view(int64_t rows) {
  if (rows > rows_) throw ShapeError("StagedMatrix: " + std::to_string(rows) + " rows asked of " + std::to_string(rows_));
  if (direct()) return host_view(rows);
  return buffer_.matrix(dtype_, rows, cols_);
}

TensorView StagedMatrix::upload(int64_t rows) {
  TensorView view = device_view(rows);
  if (!direct()) copy_tensor(view, host_view(rows));
  return view;
}

void StagedMatrix::download(int64_t rows) {
  TensorView view = device_view(rows);
  if (!direct()) {
    copy_tensor(host_view(rows), view);
    synchronize(device_, nullptr);
  }
}

}  // namespace tinyfuse::cli
