// The losses on the GPU: an elementwise kernel over (batch, padded width) with the formulas the
// CPU uses (core/loss_math.h), computed in float. Predictions are F32, F16 or BF16 and the gradients
// are written in the prediction's dtype; targets, values and the optional data pdf are F32.
// Values are per element (batch, width) or per row (batch, 1): a row's loss terms summed in the
// order loss.h fixes (groups of 8 columns), divided once. The Trainer keeps per-row values: a
// training step then writes 4 bytes of loss values per sample instead of 4 per output element,
// and divides once per row instead of once per element.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/loss_config.h"
#include "core/loss_math.h"
#include "cuda/backend.h"
#include "cuda/common.cuh"

namespace tinyfuse::cuda {

namespace {

// A strided 2-D view as the kernel sees it.
template <typename T>
struct Strided {
  T* data;
  int64_t row_stride, col_stride;
  __device__ T& operator()(int64_t r, int64_t c) const { return data[r * row_stride + c * col_stride]; }
};

template <typename T>
Strided<T> strided(const TensorView& v) {
  return {static_cast<T*>(v.data), v.strides[0], v.strides[1]};
}

// One thread per element of the padded output: values and gradients are written everywhere,
// zero in the columns past the target's. The general path, for any strides.
template <typename P>
__global__ void loss_kernel(LossKind kind, int64_t batch, int64_t width, int64_t dims, float n, float scale,
                            Strided<const P> prediction, Strided<const float> target, Strided<float> values,
                            Strided<P> gradients, Strided<const float> pdf, bool has_pdf) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * width) return;
  const int64_t b = i / width, d = i % width;
  if (d >= dims) {
    values(b, d) = 0.0f;
    gradients(b, d) = from_float<P>(0.0f);
    return;
  }
  float lum = 0.0f;
  if (kind == LossKind::RelativeL2Luminance) {
    float r = to_float(prediction(b, 0)), g = to_float(prediction(b, 1)), bl = to_float(prediction(b, 2));
    if (dims >= 6) r += to_float(prediction(b, 3)), g += to_float(prediction(b, 4)), bl += to_float(prediction(b, 5));
    lum = loss_luminance(r, g, bl);
  }
  const float p = to_float(prediction(b, d));
  const LossTerm<float> term = loss_term(kind, p, target(b, d), has_pdf ? pdf(b, d) : 1.0f, lum);
  values(b, d) = term.value / n;
  gradients(b, d) = from_float<P>(scale * term.gradient / n);
}

// Per-row values, for any strides: one thread per row, the columns in groups of 8 (loss.h's
// summation order, which dense_loss_kernel's per-row mode follows too: both give the same bits).
template <typename P>
__global__ void row_loss_kernel(LossKind kind, int64_t batch, int64_t width, int64_t dims, float n, float scale,
                                Strided<const P> prediction, Strided<const float> target, float* row_values,
                                int64_t values_rs, Strided<P> gradients, Strided<const float> pdf, bool has_pdf) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  float lum = 0.0f;
  if (kind == LossKind::RelativeL2Luminance) {
    float r = to_float(prediction(b, 0)), g = to_float(prediction(b, 1)), bl = to_float(prediction(b, 2));
    if (dims >= 6) r += to_float(prediction(b, 3)), g += to_float(prediction(b, 4)), bl += to_float(prediction(b, 5));
    lum = loss_luminance(r, g, bl);
  }
  float row = 0.0f;
  for (int64_t d0 = 0; d0 < width; d0 += 8) {
    float group = 0.0f;
    for (int64_t d = d0; d < d0 + 8 && d < width; ++d) {
      if (d >= dims) {
        gradients(b, d) = from_float<P>(0.0f);
        continue;
      }
      const LossTerm<float> term = loss_term(kind, to_float(prediction(b, d)), target(b, d), has_pdf ? pdf(b, d) : 1.0f, lum);
      group += term.value;
      gradients(b, d) = from_float<P>(scale * term.gradient / n);
    }
    row += group;
  }
  row_values[b * values_rs] = row / n;
}

// Eight consecutive elements of a row, moved as 16-byte loads and stores.
template <typename T>
struct alignas(16) Pack8 {
  T v[8];
};

// The dense path (the Trainer's buffers: rows of a multiple of 8 elements, 16-byte aligned): each
// thread takes 8 consecutive columns of a row, so the 2-D block needs no division and every
// access is a 16-byte vector. The per-element arithmetic is loss_kernel's, so both paths give the
// same bits (tests/gpu/test_gpu_losses_optimizers.cpp, GpuLossKernels).
// kRowValues: values are per row (the launcher only picks this for rows of at most 32 groups, so
// each thread holds one group): the threads of a row put their group's sum in shared memory and
// the row's first thread adds them in order and divides, as row_loss_kernel does. The loop over
// rows is block-uniform for the barriers.
// kPdf: with a data pdf; without one the pdf is the constant 1, and the compiler drops the
// divisions by it (x / 1 is x exactly: the same bits). The kernel is arithmetic-heavy enough
// (IEEE divisions per element) that this matters on the H200.
template <typename P, bool kVectorTarget, bool kRowValues, bool kPdf>
__global__ void dense_loss_kernel(LossKind kind, int64_t batch, int width, int dims, float n, float scale,
                                  const P* __restrict__ prediction, int64_t prediction_rs,
                                  Strided<const float> target, float* __restrict__ values, int64_t values_rs,
                                  P* __restrict__ gradients, int64_t gradients_rs, Strided<const float> pdf) {
  __shared__ float group_sums[kRowValues ? kThreadsPerBlock : 1];
  const int groups = width / 8;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.y; base < batch;
       base += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t b = base + threadIdx.y;
    const bool row_in_batch = b < batch;
    const P* prow = prediction + b * prediction_rs;
    float lum = 0.0f;
    if (row_in_batch && kind == LossKind::RelativeL2Luminance) {
      float r = to_float(prow[0]), g = to_float(prow[1]), bl = to_float(prow[2]);
      if (dims >= 6) r += to_float(prow[3]), g += to_float(prow[4]), bl += to_float(prow[5]);
      lum = loss_luminance(r, g, bl);
    }
    for (int group = threadIdx.x; row_in_batch && group < groups; group += blockDim.x) {
      const int d0 = group * 8;
      const Pack8<P> p = *reinterpret_cast<const Pack8<P>*>(prow + d0);
      float t[8];
      if (kVectorTarget && d0 + 8 <= dims) {
        const Pack8<float> tv = *reinterpret_cast<const Pack8<float>*>(target.data + b * target.row_stride + d0);
#pragma unroll
        for (int k = 0; k < 8; ++k) t[k] = tv.v[k];
      } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) t[k] = d0 + k < dims ? target(b, d0 + k) : 0.0f;
      }
      Pack8<float> v;
      Pack8<P> g;
      float group_sum = 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int d = d0 + k;
        if (d >= dims) {
          v.v[k] = 0.0f;
          g.v[k] = from_float<P>(0.0f);
          continue;
        }
        const LossTerm<float> term = loss_term(kind, to_float(p.v[k]), t[k], kPdf ? pdf(b, d) : 1.0f, lum);
        if constexpr (kRowValues)
          group_sum += term.value;
        else
          v.v[k] = term.value / n;
        g.v[k] = from_float<P>(scale * term.gradient / n);
      }
      if constexpr (kRowValues)
        group_sums[threadIdx.y * blockDim.x + group] = group_sum;
      else
        *reinterpret_cast<Pack8<float>*>(values + b * values_rs + d0) = v;
      *reinterpret_cast<Pack8<P>*>(gradients + b * gradients_rs + d0) = g;
    }
    if constexpr (kRowValues) {
      __syncthreads();
      if (row_in_batch && threadIdx.x == 0) {
        float row = 0.0f;
        for (int group = 0; group < groups; ++group) row += group_sums[threadIdx.y * blockDim.x + group];
        values[b * values_rs] = row / n;
      }
      __syncthreads();  // the sums are read before the next rows overwrite them
    }
  }
}


// Rows of a multiple of 8 elements, unit column stride, 16-byte aligned: dense_loss_kernel's case.
bool dense_rows(const TensorView& v) {
  return v.cols() % 8 == 0 && v.strides[1] == 1 && v.strides[0] % 8 == 0 && aligned16(v.data);
}

// dense_loss_kernel's instance for the run-time choices (each a template argument).
template <typename P, bool kVectorTarget, bool kRowValues>
auto dense_kernel_for(bool with_pdf) {
  return with_pdf ? dense_loss_kernel<P, kVectorTarget, kRowValues, true> : dense_loss_kernel<P, kVectorTarget, kRowValues, false>;
}
template <typename P, bool kVectorTarget>
auto dense_kernel_for(bool row_values, bool with_pdf) {
  return row_values ? dense_kernel_for<P, kVectorTarget, true>(with_pdf) : dense_kernel_for<P, kVectorTarget, false>(with_pdf);
}

template <typename P>
void launch_loss(LossKind kind, float loss_scale, const TensorView& prediction, const TensorView& target,
                 const TensorView& values, const TensorView& gradients, const TensorView* data_pdf, gpuStream_t stream) {
  const int64_t batch = prediction.rows(), width = prediction.cols(), dims = target.cols();
  const float n = static_cast<float>(batch * dims);  // (unused when dims == 0: every column is padding)
  const Strided<const float> pdf = data_pdf ? strided<const float>(*data_pdf) : Strided<const float>{nullptr, 0, 0};
  const Strided<const float> t = strided<const float>(target);
  const bool row_values = loss_values_per_row(values, width);
  const int64_t groups = width / 8;
  const bool dense = dense_rows(prediction) && dense_rows(gradients) && width <= (1 << 20) &&
                     (row_values ? groups <= 32 : dense_rows(values));
  if (dense) {
    const int bx = groups < 32 ? static_cast<int>(groups) : 32, by = kThreadsPerBlock / bx;
    const int64_t blocks = std::min<int64_t>((batch + by - 1) / by, 1 << 20);
    const bool vector_target = target.strides[1] == 1 && target.strides[0] % 4 == 0 && aligned16(target.data);
    const bool with_pdf = data_pdf != nullptr;
    const auto kernel = vector_target ? dense_kernel_for<P, true>(row_values, with_pdf)
                                      : dense_kernel_for<P, false>(row_values, with_pdf);
    kernel<<<static_cast<unsigned>(blocks), dim3(bx, by), 0, stream>>>(
        kind, batch, static_cast<int>(width), static_cast<int>(dims), n, loss_scale, static_cast<const P*>(prediction.data),
        prediction.strides[0], t, static_cast<float*>(values.data), values.strides[0], static_cast<P*>(gradients.data),
        gradients.strides[0], pdf);
    TF_GPU_CHECK_LAUNCH("dense_loss_kernel");
    return;
  }
  if (row_values) {
    row_loss_kernel<P><<<blocks_for(batch), kThreadsPerBlock, 0, stream>>>(
        kind, batch, width, dims, n, loss_scale, strided<const P>(prediction), t, static_cast<float*>(values.data),
        values.strides[0], strided<P>(gradients), pdf, data_pdf != nullptr);
    TF_GPU_CHECK_LAUNCH("row_loss_kernel");
    return;
  }
  const int64_t total = batch * width;
  loss_kernel<P><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(kind, batch, width, dims, n, loss_scale,
                                                                      strided<const P>(prediction), t, strided<float>(values),
                                                                      strided<P>(gradients), pdf, data_pdf != nullptr);
  TF_GPU_CHECK_LAUNCH("loss_kernel");
}

class GpuLoss final : public Loss {
 public:
  explicit GpuLoss(LossKind kind) : kind_(kind) {}
  Device device() const override { return Device::CUDA; }
  json hyperparams() const override { return {{"otype", name()}}; }
  std::string name() const override { return loss_names()[static_cast<size_t>(kind_)]; }
  std::optional<LossKind> kind() const override { return kind_; }

  void evaluate(float loss_scale, const TensorView& prediction, const TensorView& target, const TensorView& values,
                const TensorView& gradients, const TensorView* data_pdf) const override {
    if (prediction.dtype != DType::F32 && prediction.dtype != DType::F16 && prediction.dtype != DType::BF16)
      throw ShapeError("prediction: dtype must be f32, f16 or bf16 on the GPU; got " + prediction.describe());
    const DType pt = prediction.dtype;
    check_matrix(prediction, "prediction", -1, -1, pt, Device::CUDA);
    const int64_t batch = prediction.rows(), width = prediction.cols();
    check_matrix(target, "target", batch, -1, DType::F32, Device::CUDA);
    const int64_t dims = target.cols();
    if (dims > width)
      throw ShapeError("target: has " + std::to_string(dims) + " columns but the prediction only " + std::to_string(width));
    check_loss_values_shape(values, batch, width);
    check_matrix(values, "values", batch, values.cols() == 1 ? 1 : width, DType::F32, Device::CUDA);
    check_matrix(gradients, "gradients", batch, width, pt, Device::CUDA);
    if (data_pdf) check_matrix(*data_pdf, "data_pdf", batch, dims, DType::F32, Device::CUDA);
    if (kind_ == LossKind::RelativeL2Luminance && dims < 3)
      throw ShapeError("RelativeL2Luminance needs at least 3 output dims (RGB), got " + std::to_string(dims));

    if (batch * width == 0) return;
    const gpuStream_t stream = stream_of(prediction);
    if (pt == DType::BF16)
      launch_loss<__nv_bfloat16>(kind_, loss_scale, prediction, target, values, gradients, data_pdf, stream);
    else if (pt == DType::F16)
      launch_loss<__half>(kind_, loss_scale, prediction, target, values, gradients, data_pdf, stream);
    else
      launch_loss<float>(kind_, loss_scale, prediction, target, values, gradients, data_pdf, stream);
  }

 private:
  LossKind kind_;
};

}  // namespace

std::unique_ptr<Loss> make_loss(LossKind kind) { return std::make_unique<GpuLoss>(kind); }

}  // namespace tinyfuse::cuda
