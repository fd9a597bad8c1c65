// EMA on the CPU: the average's memory and its per-element update (core/optimizers/ema.h has the
// host half and the semantics).
#include <algorithm>

#include "core/optimizers/ema.h"
#include "cpu/optimizers/cpu_optimizer.h"
#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

class Ema final : public EmaOptimizer<CpuOptimizer> {
 public:
  explicit Ema(const OptimizerSpec& spec) : EmaOptimizer<CpuOptimizer>(spec, &make_cpu_optimizer) {}

 private:
  void allocate_average(size_t n, bool with_source) override {
    ema_.assign(n, 0.0f);
    source_.assign(with_source ? n : 0, 0.0f);
  }

  TensorView source_view(const StepArgs&) override {
    return TensorView::vector(source_.data(), static_cast<int64_t>(source_.size()));
  }

  void accumulate(const EmaFactors& f, const void* weights, DType dtype, Stream) override {
    if (dtype == DType::F64) accumulate(f, static_cast<const double*>(weights));
    else accumulate(f, static_cast<const float*>(weights));
  }

  template <typename T>
  void accumulate(const EmaFactors& f, const T* weights) {
    parallel_for(static_cast<int64_t>(n_params()), kOptimizerGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ema_[i] = (ema_[i] * f.keep + static_cast<float>(weights[i]) * f.take) / f.norm;
    });
  }

  void write_average(const TensorView& out) const override {
    const int64_t n = static_cast<int64_t>(n_params());
    parallel_for(n, kOptimizerGrain, [&](int64_t b, int64_t e) {
      if (out.dtype == DType::F64) {
        double* o = static_cast<double*>(out.data);
        for (int64_t i = b; i < e; ++i) o[i] = ema_[i];
      } else {
        float* o = static_cast<float*>(out.data);
        for (int64_t i = b; i < e; ++i) o[i] = ema_[i];
      }
    });
  }

  void read_average(float* host) const override { std::copy(ema_.begin(), ema_.end(), host); }
  void load_average(const float* host) override { std::copy(host, host + ema_.size(), ema_.begin()); }

  std::vector<float> ema_;
  std::vector<float> source_;  // the nested optimizer's inference weights, when it has its own
};

}  // namespace

std::unique_ptr<CpuOptimizer> make_ema(const OptimizerSpec& spec) { return std::make_unique<Ema>(spec); }

}  // namespace tinyfuse::cpu
