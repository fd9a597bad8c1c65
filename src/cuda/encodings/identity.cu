// Identity on CUDA: out = in * scale + offset, in float; padding features are 1.
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

struct IdentityOp {
  float scale, offset;
  template <typename Out>
  __device__ void encode(const float* x, Out out) const {
    out[0] = x[0] * scale + offset;
  }
  template <typename In>
  __device__ void backward(const float*, In dL_dout, float* dx) const {
    dx[0] = dL_dout[0] * scale;
  }
  template <typename Out>
  __device__ void jacobian(const float*, const float* v, Out out) const {
    out[0] = v[0] * scale;
  }
  template <typename In>
  __device__ void hessian(const float*, const float*, In, float* dx) const {
    dx[0] = 0.0f;  // linear
  }
};

}  // namespace

std::unique_ptr<GpuEncoding> make_identity_encoding(const IdentitySpec& spec, uint32_t n_dims, json hyperparams) {
  return std::make_unique<RowwiseGpuEncoding<IdentityOp>>("Identity", IdentityOp{spec.scale, spec.offset}, n_dims, 1, 1,
                                                          false, std::move(hyperparams));
}

}  // namespace tinyfuse::cuda
