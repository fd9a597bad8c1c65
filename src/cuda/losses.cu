// The losses on the GPU: one elementwise kernel over (batch, padded width) with the formulas the
// CPU uses (core/loss_math.h), computed in float. Predictions are F32, F16 or BF16 and the gradients
// are written in the prediction's dtype; targets, values and the optional data pdf are F32.
#include <string>

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
// zero in the columns past the target's.
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

class GpuLoss final : public Loss {
 public:
  explicit GpuLoss(LossKind kind) : kind_(kind) {}
  Device device() const override { return Device::CUDA; }
  json hyperparams() const override { return {{"otype", name()}}; }
  std::string name() const override { return loss_names()[static_cast<size_t>(kind_)]; }

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
    check_matrix(values, "values", batch, width, DType::F32, Device::CUDA);
    check_matrix(gradients, "gradients", batch, width, pt, Device::CUDA);
    if (data_pdf) check_matrix(*data_pdf, "data_pdf", batch, dims, DType::F32, Device::CUDA);
    if (kind_ == LossKind::RelativeL2Luminance && dims < 3)
      throw ShapeError("RelativeL2Luminance needs at least 3 output dims (RGB), got " + std::to_string(dims));

    const int64_t total = batch * width;
    if (total == 0) return;
    const float n = static_cast<float>(batch * dims);  // (unused when dims == 0: every column is padding)
    const Strided<const float> pdf =
        data_pdf ? strided<const float>(*data_pdf) : Strided<const float>{nullptr, 0, 0};
    const gpuStream_t stream = stream_of(prediction);
    if (pt == DType::BF16) {
      loss_kernel<__nv_bfloat16><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(
          kind_, batch, width, dims, n, loss_scale, strided<const __nv_bfloat16>(prediction), strided<const float>(target),
          strided<float>(values), strided<__nv_bfloat16>(gradients), pdf, data_pdf != nullptr);
    } else if (pt == DType::F16) {
      loss_kernel<__half><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(
          kind_, batch, width, dims, n, loss_scale, strided<const __half>(prediction), strided<const float>(target),
          strided<float>(values), strided<__half>(gradients), pdf, data_pdf != nullptr);
    } else {
      loss_kernel<float><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(
          kind_, batch, width, dims, n, loss_scale, strided<const float>(prediction), strided<const float>(target),
          strided<float>(values), strided<float>(gradients), pdf, data_pdf != nullptr);
    }
    TF_GPU_CHECK_LAUNCH("loss_kernel");
  }

 private:
  LossKind kind_;
};

}  // namespace

std::unique_ptr<Loss> make_loss(LossKind kind) { return std::make_unique<GpuLoss>(kind); }

}  // namespace tinyfuse::cuda
