// Moving FP32 host matrices to and from tensors of a model's dtype and device.
#pragma once

#include <cstdint>
#include <vector>

#include "tinyfuse/buffer.h"

namespace tinyfuse::cli {

// A (rows, cols) FP32 matrix filled on the host, seen by a model as a (rows, cols) tensor of
// `dtype` on `device`. When that is FP32 on the CPU the host memory is used directly; otherwise a
// device buffer is kept and copy_tensor converts and transfers.
class StagedMatrix {
 public:
  StagedMatrix(int64_t rows, int64_t cols, DType dtype, Device device);

  float* host() { return host_.data(); }
  const float* host() const { return host_.data(); }
  int64_t cols() const { return cols_; }

  // The first `rows` rows as a tensor for the model, after copying the host values there.
  TensorView upload(int64_t rows);
  // The first `rows` rows as a tensor for the model to write; download() brings them to host().
  TensorView device_view(int64_t rows);
  void download(int64_t rows);

 private:
  bool direct() const { return dtype_ == DType::F32 && device_ == Device::CPU; }
  TensorView host_view(int64_t rows) { return TensorView::matrix(host_.data(), rows, cols_); }

  int64_t rows_, cols_;
  DType dtype_;
  Device device_;
  std::vector<float> host_;
  Buffer buffer_;
};

}  // namespace tinyfuse::cli
