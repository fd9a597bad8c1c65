// OneBlob on CUDA: core/encodings/oneblob_math.h in float, one thread per input value.
#include "core/encodings/oneblob_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

// Where an input's features can be other than 0: the boundaries within three bins of the kernel's
// centre x n (a term of the wrapped CDF is exactly 0 or 1 in float once |u| >= 1.5, so a bin
// farther away has the same integer at both ends and gets exactly +0), and of its copy nearer the
// domain (x + 1 for x < 1/2, else x - 1); the third copy is that far from every boundary in [0, 1]
// when n_bins >= 8 and x lies in [0, 1]. Each window is seven features, from eight boundaries.
constexpr int kWindowFeatures = 7;
constexpr uint32_t kMinSparseBins = 8;

struct OneBlobOp {
  static constexpr bool kEncodesSparseGroups = true;  // encode_group() writes an input's features
  uint32_t n_bins;

  // out[0 .. count) (count = n_bins) = the features encode() gives: every chunk of eight written as
  // 0, then the chunks the two windows touch written again from the windows' features, evaluated
  // with encode()'s expressions (boundary k at T(k) / n). One thread an input evaluates 16
  // boundaries where a thread a chunk evaluated 9 of every chunk's (W2's 64 bins: about 75
  // instructions a feature, 696 us of its 1.46 ms inference at 2^21 on an H100). Inputs outside
  // [0, 1] (or NaN) and fewer than 8 bins take every chunk in full.
  template <typename T>
  __device__ void encode_group(const float* x_ptr, T* out, uint32_t count) const {
    const float x = x_ptr[0];
    const uint32_t chunks = (count + kOutputChunk - 1) / kOutputChunk;
    if (!(x >= 0.0f && x <= 1.0f) || n_bins < kMinSparseBins) {
      for (uint32_t c = 0; c < chunks; ++c) {
        float v[kOutputChunk];
        oneblob_encode_chunk(n_bins, x, c * kOutputChunk, v);
        store_chunk(out + c * kOutputChunk, v, min(kOutputChunk, count - c * kOutputChunk));
      }
      return;
    }
    const float n = static_cast<float>(n_bins);
    int base[2];
    float feat[2][kWindowFeatures];
    const float centre[2] = {x * n, (x < 0.5f ? x + 1.0f : x - 1.0f) * n};
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      base[w] = static_cast<int>(floorf(centre[w])) - 3;
      float left = oneblob_wrapped_cdf(static_cast<float>(base[w]) / n, x, n);
#pragma unroll
      for (int i = 0; i < kWindowFeatures; ++i) {
        const float right = oneblob_wrapped_cdf(static_cast<float>(base[w] + i + 1) / n, x, n);
        feat[w][i] = right - left;
        left = right;
      }
    }
    const float zeros[kOutputChunk] = {};
    for (uint32_t c = 0; c < chunks; ++c)
      store_chunk(out + c * kOutputChunk, zeros, min(kOutputChunk, count - c * kOutputChunk));
    // A window's seven features touch at most two chunks: those of its first and last feature.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int f = base[e / 2] + (e % 2) * (kWindowFeatures - 1);
      const int c = min(max(f, 0), static_cast<int>(count) - 1) / static_cast<int>(kOutputChunk);
      float v[kOutputChunk];
#pragma unroll
      for (int j = 0; j < static_cast<int>(kOutputChunk); ++j) {
        const int k = c * static_cast<int>(kOutputChunk) + j;
        v[j] = 0.0f;
#pragma unroll
        for (int i = 0; i < kWindowFeatures; ++i) {
          if (k == base[0] + i) v[j] = feat[0][i];
          if (k == base[1] + i) v[j] = feat[1][i];
        }
      }
      store_chunk(out + c * kOutputChunk, v, min(kOutputChunk, count - c * kOutputChunk));
    }
  }
  template <typename Out>
  __device__ void encode(const float* x, Out out) const {
    oneblob_encode(n_bins, x[0], out);
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
