// OneBlob on CUDA: core/encodings/oneblob_math.h in float, one thread per input value.
#include "core/encodings/oneblob_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

#if !defined(TINYFUSE_WITH_HIP)
// Where an input's features can be other than 0: the boundaries within three bins of the kernel's
// centre x n (a term of the wrapped CDF is exactly 0 or 1 in float once |u| >= 1.5, so a bin
// farther away has the same integer at both ends and gets exactly +0), and of its copy nearer the
// domain (x + 1 for x < 1/2, else x - 1); the third copy is that far from every boundary in [0, 1]
// when n_bins >= 8 and x lies in [0, 1]. Each window: eight boundaries, seven features.
constexpr int kWindowBoundaries = 8;
#endif

struct OneBlobOp {
  static constexpr bool kEncodesRanges = true;  // n_bins features per input: rowwise.cuh splits them
  static constexpr bool kChunksTogether = true;  // and encode_chunks_together() where it can
  uint32_t n_bins;

#if !defined(TINYFUSE_WITH_HIP)
  // encode_chunk()'s values, the eight lanes of an input (its chunks k0 = 0, 8, .., 56: rowwise.cuh
  // calls this only for 57-64 bins, a row's chunks on whole 8-lane segments) sharing the work: the
  // two windows' 16 boundaries, two a lane, with encode()'s expressions (boundary k at T(k) / n),
  // exchanged by shuffles; every other feature is exactly 0. Each lane evaluated 9 boundaries of
  // its own chunk before (about 75 instructions a feature: 696 us of W2's 1.46 ms inference at
  // 2^21 on an H100). Inputs outside [0, 1] (or NaN) take encode_chunk().
  __device__ void encode_chunks_together(const float* x_ptr, uint32_t k0, float (&out)[kOutputChunk]) const {
    const float x = x_ptr[0];
    if (!(x >= 0.0f && x <= 1.0f)) return encode_chunk(x_ptr, k0, out);  // the segment's lanes agree
    const uint32_t lane = threadIdx.x % 32, segment = 0xFFu << (lane & ~7u), j = lane & 7u;
    const float n = static_cast<float>(n_bins);
    const float centre[2] = {x * n, (x < 0.5f ? x + 1.0f : x - 1.0f) * n};
    int base[2];
#pragma unroll
    for (int w = 0; w < 2; ++w) base[w] = static_cast<int>(floorf(centre[w])) - 3;
    // Lane j: window j / 4, boundaries 2 (j % 4) and + 1 of it.
    const int mine = (j < 4 ? base[0] : base[1]) + 2 * static_cast<int>(j % 4);
    const float c0 = oneblob_wrapped_cdf(static_cast<float>(mine) / n, x, n);
    const float c1 = oneblob_wrapped_cdf(static_cast<float>(mine + 1) / n, x, n);
    float cdf[2][kWindowBoundaries];
#pragma unroll
    for (int b = 0; b < 2 * kWindowBoundaries; ++b) {
      const int src = b / 2;  // the lane (within the segment) that evaluated boundary b of the two windows
      cdf[b / kWindowBoundaries][b % kWindowBoundaries] = __shfl_sync(segment, b % 2 ? c1 : c0, src, 8);
    }
#pragma unroll
    for (uint32_t s = 0; s < kOutputChunk; ++s) {
      const int k = static_cast<int>(k0 + s);
      out[s] = 0.0f;
#pragma unroll
      for (int i = 0; i + 1 < kWindowBoundaries; ++i) {
        if (k == base[0] + i) out[s] = cdf[0][i + 1] - cdf[0][i];
        if (k == base[1] + i) out[s] = cdf[1][i + 1] - cdf[1][i];
      }
    }
  }
#endif
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
