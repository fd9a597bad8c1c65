#include "workloads/eikonal_step.h"

#include <cmath>

#ifdef TINYFUSE_BENCH_CUDA
#include "gpu_timing.h"
#include "workloads/eikonal_loss_gpu.h"
#endif

namespace tinyfuse::bench {

template <typename T>
double eikonal_workload_loss(int64_t n, const T* f, int64_t f_stride, const T* grad, const float* target,
                             double eikonal_weight, double scale, float* dL_df, float* dL_dgrad) {
  const int64_t n_l1 = n / 2, n_eikonal = n - n_l1;
  const double per_l1 = n_l1 > 0 ? 1.0 / static_cast<double>(n_l1) : 0.0;
  const double per_eikonal = n_eikonal > 0 ? 1.0 / static_cast<double>(n_eikonal) : 0.0;
  double l1 = 0, eikonal = 0;
  for (int64_t r = 0; r < n; ++r) {
    const T* g = grad + 3 * r;
    if (r < n_l1) {
      const double d = static_cast<double>(f[r * f_stride]) - static_cast<double>(target[r]);
      l1 += std::fabs(d);
      if (dL_df) dL_df[r * f_stride] = static_cast<float>(scale * per_l1 * (d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0));
      if (dL_dgrad)
        for (int k = 0; k < 3; ++k) dL_dgrad[3 * r + k] = 0.0f;
    } else {
      const double g0 = g[0], g1 = g[1], g2 = g[2], norm = std::sqrt(g0 * g0 + g1 * g1 + g2 * g2);
      eikonal += (norm - 1) * (norm - 1);
      if (dL_df) dL_df[r * f_stride] = 0.0f;
      // d/dg (|g| - 1)^2 = 2 (|g| - 1) g / |g|.
      const double c = norm > 0 ? scale * eikonal_weight * per_eikonal * 2 * (norm - 1) / norm : 0.0;
      if (dL_dgrad)
        for (int k = 0; k < 3; ++k) dL_dgrad[3 * r + k] = static_cast<float>(c * static_cast<double>(g[k]));
    }
  }
  return l1 * per_l1 + eikonal_weight * eikonal * per_eikonal;
}

template double eikonal_workload_loss<float>(int64_t, const float*, int64_t, const float*, const float*, double, double,
                                             float*, float*);
template double eikonal_workload_loss<double>(int64_t, const double*, int64_t, const double*, const float*, double,
                                              double, float*, float*);

namespace {

// Allocates `b` for a (rows, cols) matrix of `dtype` on `device` and returns its view.
TensorView allocate(Buffer& b, Device device, DType dtype, int64_t rows, int64_t cols, Stream s) {
  b = Buffer(device, static_cast<size_t>(rows) * static_cast<size_t>(cols) * dtype_size(dtype));
  return b.matrix(dtype, rows, cols, s);
}

}  // namespace

#ifdef TINYFUSE_BENCH_CUDA
GpuMatrix gpu_matrix(const TensorView& v) {
  if (v.dtype != DType::F32 && v.dtype != DType::F16)
    throw Error("the eikonal step's GPU loss takes FP32 or FP16 tensors, not " + to_string(v.dtype));
  return GpuMatrix{v.data, v.strides[0], v.dtype == DType::F16};
}
#endif

EikonalStep::EikonalStep(WorkloadModel& m, int64_t batch, double eikonal_weight, Stream stream)
    : m_(m),
      batch_(batch),
      n_l1_(batch / 2),
      width_(m.object->padded_output_width()),
      weight_(eikonal_weight),
      on_gpu_(m.object->device() == Device::CUDA) {
#ifndef TINYFUSE_BENCH_CUDA
  if (on_gpu_) throw Error("the eikonal step on a GPU needs tinyfuse-bench built with CUDA");
#endif
  if (batch < 2) throw Error("the eikonal step needs a batch of at least 2 rows (an L1 half and an eikonal half)");
  DifferentiableObject& obj = *m.object;
  const Device dev = obj.device();
  const int64_t n_eikonal = batch - n_l1_;
  out_v_ = allocate(out_, dev, obj.output_dtype(), batch, width_, stream);
  ones_v_ = allocate(ones_, dev, obj.output_dtype(), n_eikonal, width_, stream);
  d_out_v_ = allocate(d_out_dev_, dev, obj.output_dtype(), n_l1_, width_, stream);
  grad_v_ = allocate(grad_dev_, dev, obj.input_dtype(), n_eikonal, 3, stream);
  v_v_ = allocate(v_dev_, dev, obj.input_dtype(), n_eikonal, 3, stream);
  f_.assign(static_cast<size_t>(batch * width_), 0.0f);
  grad_.assign(static_cast<size_t>(batch * 3), 0.0f);
  target_.assign(static_cast<size_t>(batch), 0.0f);
  d_out_.assign(static_cast<size_t>(batch * width_), 0.0f);  // padding columns stay 0
  v_.assign(static_cast<size_t>(batch * 3), 0.0f);
  // dL/doutput of the input gradient of the first output: one in column 0.
  std::vector<float> ones(static_cast<size_t>(n_eikonal * width_), 0.0f);
  for (int64_t r = 0; r < n_eikonal; ++r) ones[static_cast<size_t>(r * width_)] = 1.0f;
  copy_tensor(ones_v_, TensorView::matrix(ones.data(), n_eikonal, width_));
  // dL/doutput of the L1 rows: only column 0 is ever written after this.
  copy_tensor(d_out_v_, TensorView::matrix(d_out_.data(), n_l1_, width_));
  if (on_gpu_) sums_dev_ = Buffer(dev, 2 * sizeof(double));
  synchronize(dev, stream);
}

void EikonalStep::gradients(const TensorView& x, const TensorView& target) {
  DifferentiableObject& obj = *m_.object;
  const Device dev = obj.device();
  const Stream s = out_v_.stream;
  const int64_t n_eikonal = batch_ - n_l1_;
  const TensorView x_l1 = x.rows_slice(0, n_l1_), x_eik = x.rows_slice(n_l1_, n_eikonal);
  const TensorView out_l1 = out_v_.rows_slice(0, n_l1_), out_eik = out_v_.rows_slice(n_l1_, n_eikonal);
  auto ctx_l1 = obj.forward(x_l1, &out_l1, false, /*prepare_input_gradients=*/false);
  auto ctx_eik = obj.forward(x_eik, &out_eik, false, /*prepare_input_gradients=*/true);
  obj.backward(*ctx_eik, x_eik, out_eik, ones_v_, &grad_v_, false, GradientMode::Ignore);  // grad_x f
  if (on_gpu_) {
#ifdef TINYFUSE_BENCH_CUDA
    auto* sums = static_cast<double*>(sums_dev_.data());
    auto* stream = static_cast<cudaStream_t>(s);
    if (target.dtype != DType::F32 || target.device != Device::CUDA)
      throw Error("the eikonal step's targets must be FP32 on the GPU");
    check_cuda(cudaMemsetAsync(sums, 0, 2 * sizeof(double), stream), "eikonal loss");
    check_cuda(queue_eikonal_workload_loss(n_l1_, n_eikonal, gpu_matrix(out_v_), static_cast<const float*>(target.data),
                                      target.strides[0], gpu_matrix(grad_v_), weight_, m_.trainer->loss_scale(),
                                      gpu_matrix(d_out_v_), gpu_matrix(v_v_), sums, stream),
          "eikonal loss kernel");
    loss_on_device_ = grad_on_device_ = true;
#endif
  } else {
    float* grad_eik = grad_.data() + 3 * n_l1_;
    copy_tensor(TensorView::matrix(f_.data(), batch_, width_), out_v_);
    copy_tensor(TensorView::matrix(grad_eik, n_eikonal, 3), grad_v_);
    copy_tensor(TensorView::matrix(target_.data(), batch_, 1), target);
    synchronize(dev, s);
    last_loss_ = eikonal_workload_loss(batch_, f_.data(), width_, grad_.data(), target_.data(), weight_,
                                       m_.trainer->loss_scale(), d_out_.data(), v_.data());
    copy_tensor(d_out_v_, TensorView::matrix(d_out_.data(), n_l1_, width_));
    copy_tensor(v_v_, TensorView::matrix(v_.data() + 3 * n_l1_, n_eikonal, 3));
  }
  // The loss through f (the L1 rows), then through grad_x f (the eikonal rows) added.
  obj.backward(*ctx_l1, x_l1, out_l1, d_out_v_, nullptr, false, GradientMode::Overwrite);
  obj.backward_backward_input(*ctx_eik, x_eik, v_v_, ones_v_, nullptr, nullptr, false, GradientMode::Accumulate);
}

void EikonalStep::run(const TensorView& x, const TensorView& target) {
  gradients(x, target);
  m_.trainer->optimizer_step(out_v_.stream);  // the stream the gradients were made on
}

double EikonalStep::last_loss() const {
#ifdef TINYFUSE_BENCH_CUDA
  if (loss_on_device_) {
    double sums[2] = {0, 0};
    check_cuda(cudaMemcpyAsync(sums, sums_dev_.data(), sizeof(sums), cudaMemcpyDeviceToHost,
                          static_cast<cudaStream_t>(out_v_.stream)),
          "eikonal loss read-back");
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(out_v_.stream)), "eikonal loss read-back");
    const int64_t n_eikonal = batch_ - n_l1_;
    last_loss_ = (n_l1_ > 0 ? sums[0] / static_cast<double>(n_l1_) : 0.0) +
                 weight_ * (n_eikonal > 0 ? sums[1] / static_cast<double>(n_eikonal) : 0.0);
    loss_on_device_ = false;
  }
#endif
  return last_loss_;
}

const std::vector<float>& EikonalStep::input_gradients() const {
  if (grad_on_device_) {
    copy_tensor(TensorView::matrix(grad_.data() + 3 * n_l1_, batch_ - n_l1_, 3), grad_v_);
    synchronize(m_.object->device(), out_v_.stream);
    grad_on_device_ = false;
  }
  return grad_;
}

}  // namespace tinyfuse::bench
