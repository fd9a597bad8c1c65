#include "cuda/encodings/gpu_encoding.h"

namespace tinyfuse::cuda {

void GpuEncoding::set_output_dtype(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::F16)
    throw UnsupportedError(name() + " on cuda writes f32 or f16 features, not " + to_string(dtype));
  output_dtype_ = dtype;
}

void GpuEncoding::check_input(const TensorView& input) const {
  check_matrix(input, "input", -1, input_width(), DType::F32, Device::CUDA);
  check_rows_dense(input, "input");
}

void GpuEncoding::check_features(const TensorView& t, const char* what, int64_t batch) const {
  check_matrix(t, what, batch, padded_output_width(), output_dtype(), Device::CUDA);
  check_rows_dense(t, what);
}

void GpuEncoding::check_input_gradient(const TensorView& t, int64_t batch, const char* what) const {
  check_matrix(t, what, batch, input_width(), DType::F32, Device::CUDA);
  check_rows_dense(t, what);
}

}  // namespace tinyfuse::cuda
