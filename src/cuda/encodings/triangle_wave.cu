// TriangleWave on CUDA: core/encodings/triangle_wave_math.h in float, one thread per input value.
#include "core/encodings/triangle_wave_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

struct TriangleWaveOp {
  uint32_t n_frequencies;
  template <typename Out>
  __device__ void encode(const float* x, Out out) const {
    triangle_wave_encode(n_frequencies, x[0], out);
  }
  template <typename In>
  __device__ void backward(const float* x, In dL_dout, float* dx) const {
    dx[0] = triangle_wave_backward(n_frequencies, x[0], dL_dout);
  }
  template <typename Out>
  __device__ void jacobian(const float* x, const float* v, Out out) const {
    triangle_wave_jacobian(n_frequencies, x[0], v[0], out);
  }
  template <typename In>
  __device__ void hessian(const float*, const float*, In, float* dx) const {
    dx[0] = 0.0f;  // piecewise linear
  }
};

}  // namespace

std::unique_ptr<GpuEncoding> make_triangle_wave_encoding(const TriangleWaveSpec& spec, uint32_t n_dims) {
  return std::make_unique<RowwiseGpuEncoding<TriangleWaveOp>>(
      "TriangleWave", TriangleWaveOp{spec.n_frequencies}, n_dims, 1, spec.n_frequencies, false,
      json{{"otype", "TriangleWave"}, {"n_frequencies", spec.n_frequencies}});
}

}  // namespace tinyfuse::cuda
