// Empty on CUDA: no features (only padding ones when asked for); zero input gradients.
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

struct EmptyOp {
  template <typename Out>
  __device__ void encode(const float*, Out) const {}
  template <typename In>
  __device__ void backward(const float*, In, float*) const {}
  template <typename Out>
  __device__ void jacobian(const float*, const float*, Out) const {}
  template <typename In>
  __device__ void hessian(const float*, const float*, In, float*) const {}
};

}  // namespace

std::unique_ptr<GpuEncoding> make_empty_encoding(uint32_t n_dims) {
  return std::make_unique<RowwiseGpuEncoding<EmptyOp>>("Empty", EmptyOp{}, n_dims, 1, 0, false, json{{"otype", "Empty"}});
}

}  // namespace tinyfuse::cuda
