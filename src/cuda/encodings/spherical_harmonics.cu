// SphericalHarmonics on CUDA: core/encodings/spherical_harmonics_math.h in float, the forward one
// thread per eight features of a direction, the other passes one thread per direction. Inputs in
// [0, 1]^3 are mapped to [-1, 1]^3 as on the CPU; padding comes first.
#include <string>
#include <type_traits>

#include "core/encodings/spherical_harmonics_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

// One Op (and so one set of kernels) per degree: with the degree a compile-time constant the
// shared formula's arrays are indexed by constants only and stay in registers (a run-time degree
// put them in local / private memory).
template <uint32_t Degree>
struct SphericalHarmonicsOp {
  using degree = std::integral_constant<uint32_t, Degree>;
  template <typename Out>
  __device__ void encode(const float* u, Out out) const {
    sh_encode(degree{}, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, out);
  }
  // The forward by chunks (rowwise.cuh's encodes_ranges): a thread per eight features, stored with
  // one 16-byte write. It evaluates every polynomial and keeps its chunk's, selected by constant
  // indices so that they stay in registers: cheaper than the sixteen 2-byte stores a thread per
  // direction scattered over 32 rows (W3's degree 4: 59 us at 2^18 rows on an H100).
  static constexpr bool kEncodesRanges = true;
  __device__ void encode_chunk(const float* u, uint32_t k0, float (&out)[kOutputChunk]) const {
    constexpr uint32_t kFeatures = Degree * Degree, kChunks = (kFeatures + kOutputChunk - 1) / kOutputChunk;
    float all[kFeatures];
    encode(u, all);
#pragma unroll
    for (uint32_t c = 0; c < kChunks; ++c)
      if (k0 == c * kOutputChunk) {
#pragma unroll
        for (uint32_t j = 0; j < kOutputChunk; ++j) {
          const uint32_t k = c * kOutputChunk + j;
          out[j] = k < kFeatures ? all[k < kFeatures ? k : kFeatures - 1] : 0.0f;
        }
      }
  }
  template <typename In>
  __device__ void backward(const float* u, In dL_dout, float* du) const {
    sh_backward(degree{}, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, dL_dout, du);
    for (int d = 0; d < 3; ++d) du[d] *= 2.0f;
  }
  // Through x = 2u - 1: J_u = 2 J_x and H_u = 4 H_x, so both take the step 2v in x.
  template <typename Out>
  __device__ void jacobian(const float* u, const float* v, Out out) const {
    const float vx[3] = {2.0f * v[0], 2.0f * v[1], 2.0f * v[2]};
    sh_jacobian(degree{}, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, vx, out);
  }
  template <typename In>
  __device__ void hessian(const float* u, const float* v, In dL_dout, float* du) const {
    const float vx[3] = {2.0f * v[0], 2.0f * v[1], 2.0f * v[2]};
    sh_hessian(degree{}, u[0] * 2.0f - 1.0f, u[1] * 2.0f - 1.0f, u[2] * 2.0f - 1.0f, dL_dout, vx, du);
    for (int d = 0; d < 3; ++d) du[d] *= 2.0f;
  }
};

template <uint32_t Degree>
std::unique_ptr<GpuEncoding> make_for_degree() {
  return std::make_unique<RowwiseGpuEncoding<SphericalHarmonicsOp<Degree>>>(
      "SphericalHarmonics", SphericalHarmonicsOp<Degree>{}, 3, 3, Degree * Degree, /*pad_in_front=*/true,
      json{{"otype", "SphericalHarmonics"}, {"degree", Degree}});
}

}  // namespace

std::unique_ptr<GpuEncoding> make_spherical_harmonics_encoding(const SphericalHarmonicsSpec& spec) {
  static_assert(kMaxShDegree == 8, "one case per supported degree");
  switch (spec.degree) {
    case 1: return make_for_degree<1>();
    case 2: return make_for_degree<2>();
    case 3: return make_for_degree<3>();
    case 4: return make_for_degree<4>();
    case 5: return make_for_degree<5>();
    case 6: return make_for_degree<6>();
    case 7: return make_for_degree<7>();
    case 8: return make_for_degree<8>();
  }
  throw ConfigError("degree", std::to_string(spec.degree), "SphericalHarmonics supports degrees 1 to 8",
                    "an integer in [1, 8]");
}

}  // namespace tinyfuse::cuda
