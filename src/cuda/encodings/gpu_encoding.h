// What every CUDA encoding shares: FP32 inputs on the device; features written as F32 or F16
// (set_output_dtype) into any row-strided view, so that a network's input buffer or a Composite's
// column slice is written in place; tiny-cuda-nn's finer padding control (core's
// PaddableEncoding, so a Composite lays its parts out as on the CPU); and the checks of the views.
#pragma once

#include <cstdint>

#include "core/encodings/paddable_encoding.h"

namespace tinyfuse::cuda {

class GpuEncoding : public PaddableEncoding {
 public:
  Device device() const override { return Device::CUDA; }
  DType input_dtype() const override { return DType::F32; }
  DType output_dtype() const override { return output_dtype_; }
  // Parameter-free encodings report F32 (the Trainer's default); encodings with parameters say theirs.
  DType param_dtype() const override { return DType::F32; }

  // F32 or F16.
  void set_output_dtype(DType dtype) override;

 protected:
  // input: (any, input_width()) F32 on CUDA, features adjacent (rows may be further apart).
  void check_input(const TensorView& input) const;
  // output or dL_doutput: (batch, padded_output_width()) of output_dtype() on CUDA, features adjacent.
  void check_features(const TensorView& t, const char* what, int64_t batch) const;
  // dL_dinput (or `what`, e.g. dL_ddLdinput): (batch, input_width()) F32 on CUDA, features adjacent.
  void check_input_gradient(const TensorView& t, int64_t batch, const char* what = "dL_dinput") const;

 private:
  DType output_dtype_ = DType::F32;
};

}  // namespace tinyfuse::cuda
