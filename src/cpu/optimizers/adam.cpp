// Adam on the CPU: the per-element update (core/optimizers/adam.h has the host half and the
// semantics). All arithmetic is in float, as on the GPU.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/optimizers/adam.h"
#include "cpu/optimizers/cpu_optimizer.h"
#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

// adam_bias_correction(beta1, beta2, t) for every counter t up to the global step, computed once
// each instead of two powf per element and step (parameters skipped on zero gradients have
// counters behind the global step). Past the t where 1 - beta^t rounds to 1 for both betas every
// value is exactly 1, and the table stops growing.
class BiasCorrections {
 public:
  void extend(float beta1, float beta2, uint32_t step) {
    if (beta1 != beta1_ || beta2 != beta2_) {
      beta1_ = beta1, beta2_ = beta2;
      table_.assign(1, 1.0f);  // t = 0 is never asked for
      saturated_ = false;
    }
    while (!saturated_ && table_.size() <= step) {
      const auto t = static_cast<uint32_t>(table_.size());
      const float tf = static_cast<float>(t);
      table_.push_back(adam_bias_correction(beta1, beta2, t));
      saturated_ = 1.0f - std::pow(beta1, tf) == 1.0f && 1.0f - std::pow(beta2, tf) == 1.0f;
    }
  }
  float at(uint32_t t) const {
    if (t < table_.size()) return table_[t];
    return saturated_ ? 1.0f : adam_bias_correction(beta1_, beta2_, t);
  }

 private:
  float beta1_ = -1.0f, beta2_ = -1.0f;
  std::vector<float> table_;
  bool saturated_ = false;
};

class Adam final : public AdamOptimizer<CpuOptimizer> {
 public:
  using AdamOptimizer<CpuOptimizer>::AdamOptimizer;

 private:
  void allocate_state(size_t n, const std::vector<ParamRun>& runs) override {
    runs_ = runs;
    first_.assign(n, 0.0f);
    second_.assign(n, 0.0f);
    param_steps_.assign(n, 0);
  }

  void update_elements(const StepArgs& args, const AdamConsts& c) override {
    corrections_.extend(c.beta1, c.beta2, c.step);
    with_step_types(args, [&](auto* p, const auto* g) {
      parallel_for(static_cast<int64_t>(args.n), kOptimizerGrain, [&](int64_t b, int64_t e) {
        for_each_run(runs_, static_cast<size_t>(b), static_cast<size_t>(e), [&](size_t rb, size_t re, bool matrix) {
          if (matrix && c.do_matrix) update_range<true>(c, rb, re, args.master, p, g);
          if (!matrix && c.do_other) update_range<false>(c, rb, re, args.master, p, g);
        });
      });
    });
  }

  template <bool kMatrix, typename P, typename G>
  void update_range(const AdamConsts& c, size_t begin, size_t end, float* master, P* params, const G* gradients) {
    for (size_t i = begin; i < end; ++i) {
      float g = static_cast<float>(gradients[i]) / c.loss_scale;
      if (!kMatrix && g == 0.0f && c.skip_zero_grad) continue;  // untouched non-matrix params keep their state
      const float w = master[i];
      g += (kMatrix ? c.l2_reg : c.non_matrix_l2_reg) * w;
      if (c.gradient_clipping != 0.0f) g = std::copysign(std::fmin(std::fabs(g), c.gradient_clipping), g);
      const float m = first_[i] = c.beta1 * first_[i] + c.one_minus_beta1 * g;
      const float v = second_[i] = c.beta2 * second_[i] + c.one_minus_beta2 * (g * g);
      const uint32_t t = ++param_steps_[i];
      float lr = kMatrix ? c.lr : c.lr * c.non_matrix_factor;
      lr *= t == c.step ? c.correction_at_step : corrections_.at(t);
      const float rate = std::fmin(std::fmax(lr / (std::sqrt(v) + c.epsilon), c.lower), c.upper);
      const float decayed = (1.0f - c.relative_decay * lr) * w - std::copysign(c.absolute_decay * lr, w);
      float new_w = decayed - rate * m;
      if (c.clipping != 0.0f) new_w = std::fmin(std::fmax(new_w, -c.clipping), c.clipping);
      master[i] = new_w;
      if (params) params[i] = static_cast<P>(new_w);
    }
  }

  void read_moments(float* first, float* second, uint32_t* steps) const override {
    std::copy(first_.begin(), first_.end(), first);
    std::copy(second_.begin(), second_.end(), second);
    std::copy(param_steps_.begin(), param_steps_.end(), steps);
  }

  void write_moments(const float* first, const float* second, const uint32_t* steps) override {
    const size_t n = first_.size();
    std::copy(first, first + n, first_.begin());
    std::copy(second, second + n, second_.begin());
    std::copy(steps, steps + n, param_steps_.begin());
  }

  std::vector<ParamRun> runs_;
  std::vector<float> first_, second_;
  std::vector<uint32_t> param_steps_;
  BiasCorrections corrections_;
};

}  // namespace

std::unique_ptr<CpuOptimizer> make_adam(const OptimizerSpec& spec) { return std::make_unique<Adam>(spec); }

}  // namespace tinyfuse::cpu
