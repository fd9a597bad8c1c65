#include "workloads/checks.h"

#include <cctype>
#include <cmath>

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

std::vector<double> cpu_reference_outputs(const WorkloadSpec& w, const std::vector<float>& params, const float* input,
                                          int64_t n, uint32_t* padded_width) {
  BuildOptions o;
  o.device = Device::CPU;
  o.cpu_precision = DType::F64;
  auto ref = build_workload_object(w, o);
  if (ref->n_params() != params.size())
    throw Error("workload reference: the FP64 model has " + std::to_string(ref->n_params()) + " parameters, the device's " +
                std::to_string(params.size()));
  std::vector<double> p(params.begin(), params.end());
  const TensorView pv = TensorView::vector(p.data(), static_cast<int64_t>(p.size()));
  ref->set_params(pv, pv, TensorView{});
  std::vector<double> in(static_cast<size_t>(n) * w.n_input_dims);
  for (size_t i = 0; i < in.size(); ++i) in[i] = input[i];
  *padded_width = ref->padded_output_width();
  std::vector<double> out(static_cast<size_t>(n) * *padded_width);
  ref->inference(TensorView::matrix(in.data(), n, w.n_input_dims), TensorView::matrix(out.data(), n, *padded_width));
  return out;
}

}  // namespace tinyfuse::bench
