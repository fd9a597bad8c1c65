// OneBlob on CUDA: core/encodings/oneblob_math.h in float, one thread per input value.
#include "core/encodings/oneblob_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

struct OneBlobOp {
  static constexpr bool kEncodesRanges = true;  // n_bins features per input: rowwise.cuh splits them
  uint32_t n_bins;
  template <typename Out>
  __device__ void encode(const float* x, Out out) const {
    oneblob_encode(n_bins, x[0], out);
  }
  __device__ void encode_chunk(const float* x, uint32_t k0, float (&out)[kOutputChunk]) const {
    oneblob_encode_chunk(n_bins, x[0], k0, out);
  }
  template <typename In>
  __device__ void backward(const float* x, In dL_dout, float* dx) const {
    dx[0] = oneblob_backward(n_bins, x[0], dL_dout);
  }
  template <typename Out>
  __device__ void jacobian(const float* x, const float* v, Out out) const {
    oneblob_jacobian(n_bins, x[0], v[0], out);
  }
  template <typename In>
  __device__ void hessian(const float* x, const float* v, In dL_dout, float* dx) const {
    dx[0] = v[0] * oneblob_backward_derivative(n_bins, x[0], dL_dout);
  }
};

}  // namespace

std::unique_ptr<GpuEncoding> make_oneblob_encoding(const OneBlobSpec& spec, uint32_t n_dims) {
  return std::make_unique<RowwiseGpuEncoding<OneBlobOp>>("OneBlob", OneBlobOp{spec.n_bins}, n_dims, 1, spec.n_bins, false,
                                                         json{{"otype", "OneBlob"}, {"n_bins", spec.n_bins}});
}

}  // namespace tinyfuse::cuda
