// A non-owning, device-neutral view of a 1-D or 2-D array: pointer, shape, strides (in elements),
// dtype, device and the stream work on it should be queued on.
// Networks take 2-D views laid out as (batch, features), matching PyTorch's (N, C).
#pragma once

#include <cstdint>
#include <string>

#include "tinyfuse/common.h"
#include "tinyfuse/errors.h"

namespace tinyfuse {

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::F64; };

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 2;
  int64_t shape[2] = {0, 0};
  int64_t strides[2] = {0, 1};
  Stream stream = nullptr;

  // Contiguous row-major 2-D view.
  static TensorView matrix(void* data, DType dtype, Device device, int64_t rows, int64_t cols,
                           Stream stream = nullptr);
  template <typename T>
  static TensorView matrix(T* data, int64_t rows, int64_t cols, Device device = Device::CPU,
                           Stream stream = nullptr) {
    return matrix(static_cast<void*>(data), dtype_of<T>::value, device, rows, cols, stream);
  }
  // Contiguous 1-D view.
  static TensorView vector(void* data, DType dtype, Device device, int64_t n, Stream stream = nullptr);
  template <typename T>
  static TensorView vector(T* data, int64_t n, Device device = Device::CPU, Stream stream = nullptr) {
    return vector(static_cast<void*>(data), dtype_of<T>::value, device, n, stream);
  }

  int64_t rows() const { return shape[0]; }
  int64_t cols() const { return ndim == 2 ? shape[1] : 1; }
  int64_t numel() const { return ndim == 2 ? shape[0] * shape[1] : shape[0]; }
  // Rows are contiguous inside (features adjacent) and rows follow each other without gaps.
  bool contiguous() const;
  // Features adjacent within a row; rows may be further apart (a column slice of a wider matrix).
  bool rows_dense() const { return ndim == 1 || strides[1] == 1; }
  bool empty() const { return numel() == 0; }

  template <typename T>
  T* ptr() const {
    if (dtype != dtype_of<T>::value)
      throw ShapeError("tensor holds " + to_string(dtype) + ", accessed as " + to_string(dtype_of<T>::value));
    return static_cast<T*>(data);
  }

  // A view of columns [begin, begin + count) of a 2-D view.
  TensorView cols_slice(int64_t begin, int64_t count) const;
  // A view of rows [begin, begin + count).
  TensorView rows_slice(int64_t begin, int64_t count) const;

  std::string describe() const;  // "(256, 64) f32 cpu strides (64, 1)"
};

// Checks used at every public entry point; `what` names the argument in the message.
void check_matrix(const TensorView& t, const char* what, int64_t rows, int64_t cols, DType dtype, Device device);
void check_rows_dense(const TensorView& t, const char* what);

}  // namespace tinyfuse
