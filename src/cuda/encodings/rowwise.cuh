// Base of the parameter-free CUDA encodings that map each input row on its own (Identity,
// Frequency, TriangleWave, OneBlob, SphericalHarmonics, Empty). An Op encodes one group of
// `group_inputs` adjacent input dims (1, or 3 for SphericalHarmonics) into `group_outputs`
// adjacent features with the shared math; this class runs it with one thread per (row, group),
// writes the padding (core's ParameterFreeEncoding says where) and handles dtypes, strides and
// checks. Input gradients need no forward state, so forward() keeps
// none. Op provides, in float:
//   template <class Out> __device__ void encode(const float* x, Out out) const;
//   template <class In> __device__ void backward(const float* x, In dL_dout, float* dx) const;
//   template <class Out> __device__ void jacobian(const float* x, const float* v, Out dy) const;
//   template <class In> __device__ void hessian(const float* x, const float* v, In dL_dout, float* dx) const;
// (backward and hessian write all group_inputs entries of dx, which start at 0). For second
// derivatives, jacobian writes J(x) v and hessian (sum_j dL/dout_j H_j(x)) v, v = dL2/d(dL/dx).
#pragma once

#include <memory>
#include <string>
#include <type_traits>

#include "core/encodings/parameter_free_encoding.h"
#include "cuda/common.cuh"
#include "cuda/encodings/feature_access.cuh"
#include "cuda/encodings/gpu_encoding.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

constexpr uint32_t kMaxGroupInputs = 3;

// dx[0 .. group_in) = d[0 .. group_in), with constant indices into d so that it stays in registers
// (a loop bounded by group_in alone would index it at run time, from the stack).
__device__ __forceinline__ void store_group(const float (&d)[kMaxGroupInputs], uint32_t group_in, float* dx) {
#pragma unroll
  for (uint32_t k = 0; k < kMaxGroupInputs; ++k)
    if (k < group_in) dx[k] = d[k];
}

// Thread i: row i / per_row, group i % per_row; the extra group n_groups (when there is padding)
// writes the row's padding.
template <typename Op, typename T>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
rowwise_encode_kernel(Op op, int64_t batch, uint32_t n_groups, uint32_t group_in, uint32_t group_out,
                      const float* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy,
                      uint32_t first_feature, uint32_t pad_begin, uint32_t n_pad) {
  const uint32_t per_row = n_groups + (n_pad > 0 ? 1u : 0u);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * per_row) return;
  const int64_t row = i / per_row;
  const uint32_t g = static_cast<uint32_t>(i % per_row);
  T* y_row = y + row * ldy;
  if (g < n_groups) {
    op.encode(x + row * ldx + g * group_in, FeatureWriter<T>{y_row + first_feature + g * group_out});
  } else {
    for (uint32_t j = 0; j < n_pad; ++j) y_row[pad_begin + j] = from_float<T>(1.0f);
  }
}

// Ops with many features per group (OneBlob: n_bins per input) also provide
//   __device__ void encode_chunk(const float* x, uint32_t k0, float (&out)[kOutputChunk]) const;
// (features k0 .. k0 + kOutputChunk - 1 of the group, the values encode() gives; those past the
// group's end are ignored) and set kEncodesRanges. Their forward gives each thread one chunk,
// chunk fastest, stored with one 16-byte write where aligned: one thread per group wrote its 64
// features 2 bytes at a time into 32 different rows, and the W2 workload's OneBlob took 600 us at
// 2^18 rows.
template <typename Op, typename = void>
struct encodes_ranges : std::false_type {};
template <typename Op>
struct encodes_ranges<Op, std::void_t<decltype(Op::kEncodesRanges)>> : std::bool_constant<Op::kEncodesRanges> {};

// Ops whose groups are mostly 0 (OneBlob) may also set kEncodesChunksTogether and provide, under CUDA,
//   __device__ void encode_chunks_together(const float* x, uint32_t k0, float (&out)[kOutputChunk]) const;
// (encode_chunk's values, computed by a group's kChunksTogether lanes together, sharing among
// themselves), which the forward calls where a group is exactly that many chunks and a row's
// chunks fill whole segments of as many lanes (no padding slot).
constexpr uint32_t kChunksTogether = 8;
template <typename Op, typename = void>
struct encodes_chunks_together : std::false_type {};
#if !defined(TINYFUSE_WITH_HIP)
template <typename Op>
struct encodes_chunks_together<Op, std::void_t<decltype(Op::kEncodesChunksTogether)>>
    : std::bool_constant<Op::kEncodesChunksTogether> {};
#endif

constexpr uint32_t kOutputChunk = 8;

// dst[0 .. count) = v[0 .. count), one 16-byte store (FP16) or two (FP32) for a whole aligned chunk.
template <typename T>
__device__ __forceinline__ void store_chunk(T* dst, const float (&v)[kOutputChunk], uint32_t count) {
  if (count == kOutputChunk && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    if constexpr (std::is_same_v<T, __half>) {
      uint4 packed;
      __half2* h = reinterpret_cast<__half2*>(&packed);
#pragma unroll
      for (uint32_t j = 0; j < kOutputChunk / 2; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
      *reinterpret_cast<uint4*>(dst) = packed;
      return;
    } else if constexpr (std::is_same_v<T, float>) {
      reinterpret_cast<float4*>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
      return;
    }
  }
#pragma unroll
  for (uint32_t j = 0; j < kOutputChunk; ++j)
    if (j < count) dst[j] = from_float<T>(v[j]);
}

// Thread i: row i / per_row, then (group, chunk) with the chunk fastest; the extra slot (when
// there is padding) writes the row's padding.
template <typename Op, typename T>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
rowwise_encode_chunks_kernel(Op op, int64_t batch, uint32_t n_groups, uint32_t group_in, uint32_t group_out,
                             const float* __restrict__ x, int64_t ldx, T* __restrict__ y, int64_t ldy,
                             uint32_t first_feature, uint32_t pad_begin, uint32_t n_pad, bool together) {
  const uint32_t chunks = (group_out + kOutputChunk - 1) / kOutputChunk;
  const uint32_t per_row = n_groups * chunks + (n_pad > 0 ? 1u : 0u);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * per_row) return;
  const int64_t row = i / per_row;
  const uint32_t j = static_cast<uint32_t>(i % per_row);
  T* y_row = y + row * ldy;
  if (j < n_groups * chunks) {
    const uint32_t g = j / chunks, k0 = (j % chunks) * kOutputChunk;
    float v[kOutputChunk];
    if constexpr (encodes_chunks_together<Op>::value) {
      // Whole segments exit above together: batch * per_row is a multiple of the segment.
      if (together)
        op.encode_chunks_together(x + row * ldx + g * group_in, k0, v);
      else
        op.encode_chunk(x + row * ldx + g * group_in, k0, v);
    } else {
      (void)together;
      op.encode_chunk(x + row * ldx + g * group_in, k0, v);
    }
    store_chunk(y_row + first_feature + g * group_out + k0, v, min(kOutputChunk, group_out - k0));
  } else {
    for (uint32_t k = 0; k < n_pad; ++k) y_row[pad_begin + k] = from_float<T>(1.0f);
  }
}

template <typename Op, typename T>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
rowwise_backward_kernel(Op op, int64_t batch, uint32_t n_groups, uint32_t group_in, uint32_t group_out,
                        const float* __restrict__ x, int64_t ldx, const T* __restrict__ g, int64_t ldg,
                        uint32_t first_feature, float* __restrict__ dx, int64_t lddx) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * n_groups) return;
  const int64_t row = i / n_groups;
  const uint32_t group = static_cast<uint32_t>(i % n_groups);
  float d[kMaxGroupInputs] = {0.0f, 0.0f, 0.0f};
  op.backward(x + row * ldx + group * group_in, FeatureReader<T>{g + row * ldg + first_feature + group * group_out}, d);
  store_group(d, group_in, dx + row * lddx + group * group_in);
}

// Second order, thread i as in the forward: dL2/d(dL/dy) = J(x) v for the group's features, 0 for
// the padding (constant features).
template <typename Op, typename T>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
rowwise_jacobian_kernel(Op op, int64_t batch, uint32_t n_groups, uint32_t group_in, uint32_t group_out,
                        const float* __restrict__ x, int64_t ldx, const float* __restrict__ v, int64_t ldv,
                        T* __restrict__ dy, int64_t lddy, uint32_t first_feature, uint32_t pad_begin,
                        uint32_t n_pad) {
  const uint32_t per_row = n_groups + (n_pad > 0 ? 1u : 0u);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * per_row) return;
  const int64_t row = i / per_row;
  const uint32_t g = static_cast<uint32_t>(i % per_row);
  T* dy_row = dy + row * lddy;
  if (g < n_groups) {
    op.jacobian(x + row * ldx + g * group_in, v + row * ldv + g * group_in,
                FeatureWriter<T>{dy_row + first_feature + g * group_out});
  } else {
    for (uint32_t j = 0; j < n_pad; ++j) dy_row[pad_begin + j] = from_float<T>(0.0f);
  }
}

// dL2/dx = (sum_j dL/dy_j H_j(x)) v, one thread per (row, group).
template <typename Op, typename T>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
rowwise_hessian_kernel(Op op, int64_t batch, uint32_t n_groups, uint32_t group_in, uint32_t group_out,
                       const float* __restrict__ x, int64_t ldx, const float* __restrict__ v, int64_t ldv,
                       const T* __restrict__ g, int64_t ldg, uint32_t first_feature, float* __restrict__ dx,
                       int64_t lddx) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * n_groups) return;
  const int64_t row = i / n_groups;
  const uint32_t group = static_cast<uint32_t>(i % n_groups);
  float d[kMaxGroupInputs] = {0.0f, 0.0f, 0.0f};
  op.hessian(x + row * ldx + group * group_in, v + row * ldv + group * group_in,
             FeatureReader<T>{g + row * ldg + first_feature + group * group_out}, d);
  store_group(d, group_in, dx + row * lddx + group * group_in);
}

template <typename Op>
class RowwiseGpuEncoding final : public ParameterFreeEncoding<GpuEncoding> {
 public:
  // The n_inputs dims are encoded in groups of group_inputs (none when group_outputs is 0).
  RowwiseGpuEncoding(std::string name, Op op, uint32_t n_inputs, uint32_t group_inputs, uint32_t group_outputs,
                     bool pad_in_front, json hyperparams)
      : ParameterFreeEncoding<GpuEncoding>(std::move(name), n_inputs,
                                           (group_outputs == 0 ? 0 : n_inputs / group_inputs) * group_outputs,
                                           pad_in_front, std::move(hyperparams)),
        op_(op),
        n_groups_(group_outputs == 0 ? 0 : n_inputs / group_inputs),
        group_in_(group_inputs),
        group_out_(group_outputs) {}

  void inference(const TensorView& input, const TensorView& output) override {
    check_input(input);
    encode(input, output);
  }

  // For a network that runs this encoding inside its own inference kernel: the op, with `input`
  // checked as inference() checks it, where the features have no padding; null otherwise.
  const Op* op_without_padding(const TensorView& input) const {
    if (padding() != 0 || n_groups_ == 0) return nullptr;
    check_input(input);
    return &op_;
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool, bool) override {
    check_input(input);
    if (output) encode(input, *output);
    return std::make_unique<Context>();
  }

  void backward(const Context&, const TensorView& input, const TensorView&, const TensorView& dL_doutput,
                const TensorView* dL_dinput, bool, GradientMode) override {
    if (!dL_dinput) return;  // no parameters: only input gradients to compute
    check_input(input);
    const int64_t batch = input.rows();
    check_features(dL_doutput, "dL_doutput", batch);
    check_input_gradient(*dL_dinput, batch);
    if (batch == 0) return;
    const gpuStream_t stream = stream_of(input);
    if (n_groups_ == 0) {  // nothing encoded: every input gradient is 0
      TensorView zero = *dL_dinput;
      zero.stream = input.stream;
      if (input_width() > 0) fill_tensor(zero, 0.0);
      return;
    }
    const uint32_t first = first_feature();
    auto launch = [&](auto* g) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(g)>>;
      rowwise_backward_kernel<Op, T><<<blocks_for(batch * n_groups_), kThreadsPerBlock, 0, stream>>>(
          op_, batch, n_groups_, group_in_, group_out_, input.ptr<float>(), input.strides[0], g, dL_doutput.strides[0],
          first, dL_dinput->ptr<float>(), dL_dinput->strides[0]);
      TF_GPU_CHECK_LAUNCH("encoding backward");
    };
    if (output_dtype() == DType::F16) launch(static_cast<const __half*>(dL_doutput.data));
    else launch(static_cast<const float*>(dL_doutput.data));
  }

  // backward() wrote dL/dx = J(x)^T dL/dy; given v = dL2/d(dL/dx): dL2/d(dL/dy) = J(x) v and
  // dL2/dx = (sum_j dL/dy_j H_j(x)) v. No parameters, so no parameter gradients whatever the mode.
  void backward_backward_input(const Context&, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool, GradientMode) override {
    check_input(input);
    const int64_t batch = input.rows();
    check_input_gradient(dL_ddLdinput, batch, "dL_ddLdinput");
    check_features(dL_doutput, "dL_doutput", batch);
    if (dL_ddLdoutput) check_features(*dL_ddLdoutput, "dL_ddLdoutput", batch);
    if (dL_dinput) check_input_gradient(*dL_dinput, batch);
    if (batch == 0) return;
    const gpuStream_t stream = stream_of(input);
    const uint32_t first = first_feature(), n_pad = padding();
    if (dL_ddLdoutput) {
      const uint32_t per_row = n_groups_ + (n_pad > 0 ? 1u : 0u);
      auto launch = [&](auto* dy) {
        using T = std::remove_pointer_t<decltype(dy)>;
        rowwise_jacobian_kernel<Op, T><<<blocks_for(batch * per_row), kThreadsPerBlock, 0, stream>>>(
            op_, batch, n_groups_, group_in_, group_out_, input.ptr<float>(), input.strides[0], dL_ddLdinput.ptr<float>(),
            dL_ddLdinput.strides[0], dy, dL_ddLdoutput->strides[0], first, padding_begin(), n_pad);
        TF_GPU_CHECK_LAUNCH("encoding second order (features)");
      };
      if (per_row > 0) {
        if (output_dtype() == DType::F16) launch(static_cast<__half*>(dL_ddLdoutput->data));
        else launch(static_cast<float*>(dL_ddLdoutput->data));
      }
    }
    if (!dL_dinput || input_width() == 0) return;
    if (n_groups_ == 0) {  // nothing encoded: the input gradient was 0 whatever the input
      TensorView zero = *dL_dinput;
      zero.stream = input.stream;
      fill_tensor(zero, 0.0);
      return;
    }
    auto launch = [&](auto* g) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(g)>>;
      rowwise_hessian_kernel<Op, T><<<blocks_for(batch * n_groups_), kThreadsPerBlock, 0, stream>>>(
          op_, batch, n_groups_, group_in_, group_out_, input.ptr<float>(), input.strides[0], dL_ddLdinput.ptr<float>(),
          dL_ddLdinput.strides[0], g, dL_doutput.strides[0], first, dL_dinput->ptr<float>(), dL_dinput->strides[0]);
      TF_GPU_CHECK_LAUNCH("encoding second order (input)");
    };
    if (output_dtype() == DType::F16) launch(static_cast<const __half*>(dL_doutput.data));
    else launch(static_cast<const float*>(dL_doutput.data));
  }

 private:
  void encode(const TensorView& input, const TensorView& output) const {
    const int64_t batch = input.rows();
    check_features(output, "output", batch);
    const uint32_t n_pad = padding();
    const uint32_t per_row = n_groups_ + (n_pad > 0 ? 1u : 0u);
    if (batch == 0 || per_row == 0) return;
    const uint32_t first = first_feature(), pad_begin = padding_begin();
    const gpuStream_t stream = stream_of(input);
    auto launch = [&](auto* y) {
      using T = std::remove_pointer_t<decltype(y)>;
      if constexpr (encodes_ranges<Op>::value) {
        const uint32_t chunks = (group_out_ + kOutputChunk - 1) / kOutputChunk;
        const uint32_t chunked = n_groups_ * chunks + (n_pad > 0 ? 1u : 0u);
        const bool together = encodes_chunks_together<Op>::value && chunks == kChunksTogether && n_pad == 0;
        rowwise_encode_chunks_kernel<Op, T><<<blocks_for(batch * chunked), kThreadsPerBlock, 0, stream>>>(
            op_, batch, n_groups_, group_in_, group_out_, input.ptr<float>(), input.strides[0], y, output.strides[0],
            first, pad_begin, n_pad, together);
      } else {
        rowwise_encode_kernel<Op, T><<<blocks_for(batch * per_row), kThreadsPerBlock, 0, stream>>>(
            op_, batch, n_groups_, group_in_, group_out_, input.ptr<float>(), input.strides[0], y, output.strides[0],
            first, pad_begin, n_pad);
      }
      TF_GPU_CHECK_LAUNCH("encoding forward");
    };
    if (output_dtype() == DType::F16) launch(static_cast<__half*>(output.data));
    else launch(static_cast<float*>(output.data));
  }

  Op op_;
  uint32_t n_groups_, group_in_, group_out_;
};

}  // namespace tinyfuse::cuda
