#include "workloads/checks.h"

#include <cctype>
#include <cmath>
#include <memory>

#include "tinyfuse/buffer.h"
#include "tinyfuse/factory.h"
#include "workloads/model.h"

namespace tinyfuse::bench {

std::optional<double> host_loss(const std::string& otype, const float* pred, int64_t pred_stride, const float* target,
                                int64_t n, int64_t n_out) {
  std::string name;
  for (char c : otype) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name != "l2" && name != "l1" && name != "relativel2") return std::nullopt;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n_out; ++j) {
      const double p = pred[i * pred_stride + j], t = target[i * n_out + j], d = p - t;
      sum += name == "l1" ? std::fabs(d) : name == "l2" ? d * d : d * d / (p * p + 0.01);
    }
  return sum / static_cast<double>(n * n_out);
}

std::vector<float> to_host(const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(view.numel()));
  copy_tensor(TensorView::matrix(out.data(), view.rows(), view.cols()), view);
  synchronize(view.device, view.stream);
  return out;
}

double reference_tolerance(DType param_dtype) {
  switch (param_dtype) {
    case DType::F16: return 2e-2;
    case DType::BF16: return 5e-2;
    default: return 1e-4;
  }
}

namespace {

// The workload's object on the CPU in FP64 with `params`.
std::unique_ptr<DifferentiableObject> reference_model(const WorkloadSpec& w, const std::vector<float>& params,
                                                      std::vector<double>& storage) {
  BuildOptions o;
  o.device = Device::CPU;
  o.cpu_precision = DType::F64;
  auto ref = build_workload_object(w, o);
  if (ref->n_params() != params.size())
    throw Error("workload reference: the FP64 model has " + std::to_string(ref->n_params()) + " parameters, the device's " +
                std::to_string(params.size()));
  storage.assign(params.begin(), params.end());
  const TensorView pv = TensorView::vector(storage.data(), static_cast<int64_t>(storage.size()));
  ref->set_params(pv, pv, TensorView{});
  return ref;
}

std::vector<double> widen(const float* input, size_t n) { return std::vector<double>(input, input + n); }

}  // namespace

std::vector<double> cpu_reference_outputs(const WorkloadSpec& w, const std::vector<float>& params, const float* input,
                                          int64_t n, uint32_t* padded_width) {
  std::vector<double> p;
  auto ref = reference_model(w, params, p);
  std::vector<double> in = widen(input, static_cast<size_t>(n) * w.n_input_dims);
  *padded_width = ref->padded_output_width();
  std::vector<double> out(static_cast<size_t>(n) * *padded_width);
  ref->inference(TensorView::matrix(in.data(), n, w.n_input_dims), TensorView::matrix(out.data(), n, *padded_width));
  return out;
}

std::vector<double> cpu_reference_input_gradients(const WorkloadSpec& w, const std::vector<float>& params,
                                                  const float* input, int64_t n) {
  std::vector<double> p;
  auto ref = reference_model(w, params, p);
  std::vector<double> in = widen(input, static_cast<size_t>(n) * w.n_input_dims);
  const int64_t width = ref->padded_output_width();
  std::vector<double> out(static_cast<size_t>(n * width)), ones(out.size(), 0.0), grad(in.size());
  for (int64_t r = 0; r < n; ++r) ones[static_cast<size_t>(r * width)] = 1.0;
  const TensorView x = TensorView::matrix(in.data(), n, w.n_input_dims), y = TensorView::matrix(out.data(), n, width);
  const TensorView g = TensorView::matrix(grad.data(), n, w.n_input_dims);
  auto ctx = ref->forward(x, &y, false, /*prepare_input_gradients=*/true);
  ref->backward(*ctx, x, y, TensorView::matrix(ones.data(), n, width), &g, false, GradientMode::Ignore);
  return grad;
}

std::vector<double> cpu_finite_difference_gradients(const WorkloadSpec& w, const std::vector<float>& params,
                                                    const float* input, int64_t n, double h) {
  std::vector<double> p;
  auto ref = reference_model(w, params, p);
  const int64_t dims = w.n_input_dims, width = ref->padded_output_width();
  // Rows (r, k, +h) and (r, k, -h), evaluated in one call.
  std::vector<double> in(static_cast<size_t>(2 * n * dims * dims)), out(static_cast<size_t>(2 * n * dims * width));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < dims; ++k)
      for (int side = 0; side < 2; ++side) {
        double* q = &in[static_cast<size_t>(((r * dims + k) * 2 + side) * dims)];
        for (int64_t j = 0; j < dims; ++j) q[j] = input[r * dims + j];
        q[k] += side == 0 ? h : -h;
      }
  const int64_t rows = 2 * n * dims;
  ref->inference(TensorView::matrix(in.data(), rows, dims), TensorView::matrix(out.data(), rows, width));
  std::vector<double> grad(static_cast<size_t>(n * dims));
  for (int64_t i = 0; i < n * dims; ++i) grad[static_cast<size_t>(i)] = (out[static_cast<size_t>(2 * i * width)] - out[static_cast<size_t>((2 * i + 1) * width)]) / (2 * h);
  return grad;
}

}  // namespace tinyfuse::bench
