#include "tinyfuse/tensor.h"

namespace tinyfuse {

TensorView TensorView::matrix(void* data, DType dtype, Device device, int64_t rows, int64_t cols, Stream stream) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.strides[0] = cols;
  t.strides[1] = 1;
  t.stream = stream;
  return t;
}

TensorView TensorView::vector(void* data, DType dtype, Device device, int64_t n, Stream stream) {
  TensorView t = matrix(data, dtype, device, n, 1, stream);
  t.ndim = 1;
  t.strides[0] = 1;
  return t;
}

bool TensorView::contiguous() const {
  if (ndim == 1) return strides[0] == 1 || shape[0] <= 1;
  return (strides[1] == 1 || shape[1] <= 1) && (strides[0] == shape[1] || shape[0] <= 1);
}

TensorView TensorView::cols_slice(int64_t begin, int64_t count) const {
  if (ndim != 2 || begin < 0 || count < 0 || begin + count > shape[1])
    throw ShapeError("column slice [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                     ") out of range for " + describe());
  TensorView t = *this;
  t.data = static_cast<char*>(data) + begin * strides[1] * static_cast<int64_t>(dtype_size(dtype));
  t.shape[1] = count;
  return t;
}

TensorView TensorView::rows_slice(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin + count > shape[0])
    throw ShapeError("row slice [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                     ") out of range for " + describe());
  TensorView t = *this;
  t.data = static_cast<char*>(data) + begin * strides[0] * static_cast<int64_t>(dtype_size(dtype));
  t.shape[0] = count;
  return t;
}

std::string TensorView::describe() const {
  std::string s = "(" + std::to_string(shape[0]);
  if (ndim == 2) s += ", " + std::to_string(shape[1]);
  s += ") " + to_string(dtype) + " " + to_string(device) + " strides (" + std::to_string(strides[0]);
  if (ndim == 2) s += ", " + std::to_string(strides[1]);
  return s + ")";
}

void check_matrix(const TensorView& t, const char* what, int64_t rows, int64_t cols, DType dtype, Device device) {
  auto fail = [&](const std::string& why) {
    throw ShapeError(std::string(what) + ": " + why + "; got " + t.describe());
  };
  if (t.ndim != 2) fail("must be 2-D (batch, features)");
  if (t.data == nullptr && t.numel() > 0) fail("null data pointer");
  if (t.dtype != dtype) fail("dtype must be " + to_string(dtype));
  if (t.device != device) fail("must be on " + to_string(device));
  if (rows >= 0 && t.shape[0] != rows) fail("must have " + std::to_string(rows) + " rows");
  if (cols >= 0 && t.shape[1] != cols) fail("must have " + std::to_string(cols) + " columns");
  if (t.shape[0] < 0 || t.shape[1] < 0) fail("negative shape");
  if (t.shape[0] > 1 && t.strides[0] < t.shape[1] * t.strides[1]) fail("rows overlap (row stride too small)");
}

void check_rows_dense(const TensorView& t, const char* what) {
  if (!t.rows_dense())
    throw ShapeError(std::string(what) + ": features must be adjacent in memory (column stride 1); got " + t.describe());
}

}  // namespace tinyfuse
