// SphericalHarmonics on CUDA: core/encodings/spherical_harmonics_math.h in float, one thread per
// direction. Inputs in [0, 1]^3 are mapped to [-1, 1]^3 as on the CPU; padding comes first.
#include "core/encodings/spherical_harmonics_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

struct SphericalHarmonicsOp {
  uint32_t degree;
  template <typename Out>
  __device__ void encode(const float* u, Out out) const {
    sh_encode(degree, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, out);
  }
  template <typename In>
  __device__ void backward(const float* u, In dL_dout, float* du) const {
    sh_backward(degree, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, dL_dout, du);
    for (int d = 0; d < 3; ++d) du[d] *= 2.0f;
  }
  // Through x = 2u - 1: J_u = 2 J_x and H_u = 4 H_x, so both take the step 2v in x.
  template <typename Out>
  __device__ void jacobian(const float* u, const float* v, Out out) const {
    const float vx[3] = {2.0f * v[0], 2.0f * v[1], 2.0f * v[2]};
    sh_jacobian(degree, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, vx, out);
  }
  template <typename In>
  __device__ void hessian(const float* u, const float* v, In dL_dout, float* du) const {
    const float vx[3] = {2.0f * v[0], 2.0f * v[1], 2.0f * v[2]};
    sh_hessian(degree, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, dL_dout, vx, du);
    for (int d = 0; d < 3; ++d) du[d] *= 2.0f;
  }
};

}  // namespace

std::unique_ptr<GpuEncoding> make_spherical_harmonics_encoding(const SphericalHarmonicsSpec& spec) {
  return std::make_unique<RowwiseGpuEncoding<SphericalHarmonicsOp>>(
      "SphericalHarmonics", SphericalHarmonicsOp{spec.degree}, 3, 3, spec.degree * spec.degree, /*pad_in_front=*/true,
      json{{"otype", "SphericalHarmonics"}, {"degree", spec.degree}});
}

}  // namespace tinyfuse::cuda
