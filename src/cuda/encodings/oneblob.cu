// OneBlob on CUDA: core/encodings/oneblob_math.h in float, one thread per input value.
#include "core/encodings/oneblob_math.h"
#include "cuda/encodings/basic.h"
#include "cuda/encodings/rowwise.cuh"

namespace tinyfuse::cuda {

namespace {

struct OneBlobOp {
  static constexpr bool kEncodesRanges = true;  // n_bins features per input: rowwise.cuh splits them
  static constexpr bool kEncodesChunksTogether = true;  // and encode_chunks_together() where it can
  uint32_t n_bins;
  float inv_bins;  // oneblob_inv_bins(n_bins): boundaries without a division where exact

#if !defined(TINYFUSE_WITH_HIP)
  // encode_chunk()'s values, the eight lanes of an input (its chunks k0 = 0, 8, .., 56: rowwise.cuh
  // calls this only for 57-64 bins, a row's chunks on whole 8-lane segments) sharing the work.
  // Only two windows of an input's features can be other than 0: the bins within three of the
  // kernel's centre x n and of its copy nearer the domain (x + 1 for x < 1/2, else x - 1); a term
  // of the wrapped CDF is exactly 0 or 1 in float once |u| >= 1.5, so a bin farther away has the
  // same integer at both ends and gets exactly +0, and the third copy is that far from every
  // boundary in [0, 1] (n_bins >= 8, x in [0, 1]). Each window is eight boundaries, two a lane,
  // evaluated with encode()'s expressions (boundary k at T(k) / n); the features go through the
  // segment's 64 floats of shared memory (zeros, then the windows' 14 features at their bins) and
  // each lane takes its chunk back. Each lane evaluated the 9 boundaries of its own chunk before
  // (696 us of W2's 1.46 ms inference at 2^21 on an H100; 346 us now). Inputs outside [0, 1] (or
  // NaN) take encode_chunk().
  __device__ void encode_chunks_together(const float* x_ptr, uint32_t k0, float (&out)[kOutputChunk]) const {
    const float x = x_ptr[0];
    if (!(x >= 0.0f && x <= 1.0f)) return encode_chunk(x_ptr, k0, out);  // the segment's lanes agree
    constexpr uint32_t kSegments = kThreadsPerBlock / kChunksTogether;
    __shared__ float4 features[kSegments][kChunksTogether * kOutputChunk / 4];
    // A segment is kChunksTogether lanes (an input's chunks); its two windows take half each.
    static_assert(gpu::kWarpSize == 32 && gpu::kWarpSize % kChunksTogether == 0,
                  "segments tile a 32-lane warp");
    static_assert(kChunksTogether * kOutputChunk == 64 && kChunksTogether == 8,
                  "two windows of eight boundaries, two a lane, over 64 bins");
    constexpr uint32_t kWindowLanes = kChunksTogether / 2;
    const uint32_t lane = threadIdx.x % gpu::kWarpSize, j = lane % kChunksTogether;
    const uint32_t segment = ((1u << kChunksTogether) - 1) << (lane & ~(kChunksTogether - 1));
    float4* mine_row = features[threadIdx.x / kChunksTogether];
    mine_row[2 * j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    mine_row[2 * j + 1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float n = static_cast<float>(n_bins);
    // Lane j: window j / 4 (0: the kernel at x; 1: its copy nearer the domain), its boundaries
    // 2 (j % 4) and + 1; feature i of a window is boundary i + 1's value less boundary i's.
    const float centre = (j < kWindowLanes ? x : (x < 0.5f ? x + 1.0f : x - 1.0f)) * n;
    const int first = static_cast<int>(floorf(centre)) - 3 + 2 * static_cast<int>(j % kWindowLanes);
    const float c0 = oneblob_wrapped_cdf(oneblob_boundary(first, n, inv_bins), x, n);
    const float c1 = oneblob_wrapped_cdf(oneblob_boundary(first + 1, n, inv_bins), x, n);
    // Boundary first + 2: the next lane's first.
    const float c2 = __shfl_down_sync(segment, c0, 1, kChunksTogether);
    __syncwarp(segment);  // the zeros first
    float* row = reinterpret_cast<float*>(mine_row);
    if (first >= 0 && first < static_cast<int>(n_bins)) row[first] = c1 - c0;
    // The window's last lane has no next boundary: its second feature is past the window (0).
    const bool last_lane = j % kWindowLanes == kWindowLanes - 1;
    if (!last_lane && first + 1 >= 0 && first + 1 < static_cast<int>(n_bins)) row[first + 1] = c2 - c1;
    __syncwarp(segment);
    const float4 a = mine_row[k0 / 4], b = mine_row[k0 / 4 + 1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
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

std::optional<fused::OneBlobInput> fused_oneblob_input(const Encoding& encoding, const TensorView& input) {
  const auto* oneblob = dynamic_cast<const RowwiseGpuEncoding<OneBlobOp>*>(&encoding);
  if (!oneblob || oneblob->output_dtype() != DType::F16 || oneblob->input_width() > fused::kOneBlobMaxDims)
    return std::nullopt;
  const OneBlobOp* op = oneblob->op_without_padding(input);
  // Two windows of nonzero features a position from 8 bins on (encode_chunks_together's argument).
  if (!op || op->n_bins < 8 || op->n_bins % 8 != 0) return std::nullopt;
  fused::OneBlobInput in;
  in.x = input.ptr<float>();
  in.ldx = input.strides[0];
  in.dims = oneblob->input_width();
  in.n_bins = op->n_bins;
  in.inv_bins = op->inv_bins;
  return in;
}

std::unique_ptr<GpuEncoding> make_oneblob_encoding(const OneBlobSpec& spec, uint32_t n_dims) {
  const OneBlobOp op{spec.n_bins, oneblob_inv_bins(spec.n_bins)};
  return std::make_unique<RowwiseGpuEncoding<OneBlobOp>>("OneBlob", op, n_dims, 1, spec.n_bins, false,
                                                         json{{"otype", "OneBlob"}, {"n_bins", spec.n_bins}});
}

}  // namespace tinyfuse::cuda
