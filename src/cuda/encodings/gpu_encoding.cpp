#include "cuda/encodings/gpu_encoding.h"

#include <algorithm>
#include <numeric>

namespace tinyfuse::cuda {

void GpuEncoding::set_output_dtype(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::F16)
    throw UnsupportedError(name() + " on cuda writes f32 or f16 features, not " + to_string(dtype));
  output_dtype_ = dtype;
}

void GpuEncoding::set_alignment(uint32_t alignment) {
  set_padded_output_width(
      next_multiple(output_width(), std::lcm(std::max(alignment, 1u), std::max(required_output_alignment(), 1u))));
}

void GpuEncoding::check_input(const TensorView& input) const {
  check_matrix(input, "input", -1, input_width(), DType::F32, Device::CUDA);
  check_rows_dense(input, "input");
}

void GpuEncoding::check_features(const TensorView& t, const char* what, int64_t batch) const {
  check_matrix(t, what, batch, padded_output_width(), output_dtype(), Device::CUDA);
  check_rows_dense(t, what);
}

void GpuEncoding::check_input_gradient(const TensorView& t, int64_t batch) const {
  check_matrix(t, "dL_dinput", batch, input_width(), DType::F32, Device::CUDA);
  check_rows_dense(t, "dL_dinput");
}

uint32_t required_output_alignment(const Encoding& encoding) {
  if (const auto* e = dynamic_cast<const GpuEncoding*>(&encoding)) return std::max(e->required_output_alignment(), 1u);
  const json hp = encoding.hyperparams();
  if (hp.is_object() && hp.contains("n_features_per_level") && hp.at("n_features_per_level").is_number_integer()) {
    const int64_t n = hp.at("n_features_per_level").get<int64_t>();
    return n > 1 ? static_cast<uint32_t>(n) : 1u;
  }
  return 1;
}

}  // namespace tinyfuse::cuda
