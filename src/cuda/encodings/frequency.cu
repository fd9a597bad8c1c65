// Frequency on CUDA: core/encodings/frequency_math.h in float, one thread per input value.
#include "core/encodings/frequency_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

struct FrequencyOp {
  uint32_t n_frequencies;
  template <typename Out>
  __device__ void encode(const float* x, Out out) const {
    frequency_encode(n_frequencies, x[0], out);
  }
  template <typename In>
  __device__ void backward(const float* x, In dL_dout, float* dx) const {
    dx[0] = frequency_backward(n_frequencies, x[0], dL_dout);
  }
  template <typename Out>
  __device__ void jacobian(const float* x, const float* v, Out out) const {
    frequency_jacobian(n_frequencies, x[0], v[0], out);
  }
  template <typename In>
  __device__ void hessian(const float* x, const float* v, In dL_dout, float* dx) const {
    dx[0] = v[0] * frequency_backward_derivative(n_frequencies, x[0], dL_dout);
  }
};

}  // namespace

std::unique_ptr<GpuEncoding> make_frequency_encoding(const FrequencySpec& spec, uint32_t n_dims) {
  return std::make_unique<RowwiseGpuEncoding<FrequencyOp>>(
      "Frequency", FrequencyOp{spec.n_frequencies}, n_dims, 1, 2 * spec.n_frequencies, false,
      json{{"otype", "Frequency"}, {"n_frequencies", spec.n_frequencies}});
}

}  // namespace tinyfuse::cuda
