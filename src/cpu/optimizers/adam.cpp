// Adam with tiny-cuda-nn's semantics: a step counter per parameter (non-matrix parameters with a
// zero gradient are skipped entirely by default, e.g. untouched hash-grid entries), l2_reg on
// matrix parameters and non_matrix_l2_reg on the others, optional gradient clipping, epsilon added
// to sqrt(v) before bias correction, optional AdaBound bounds, relative / absolute weight decay
// and weight clipping. All arithmetic is in float, as on the GPU.
#include <cfloat>
#include <cmath>

#include "core/optimizers/adam_state.h"
#include "cpu/optimizers/cpu_optimizer.h"
#include "cpu/parallel.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cpu {

namespace {

class Adam final : public CpuOptimizer {
 public:
  explicit Adam(const OptimizerSpec& spec)
      : CpuOptimizer(spec.path), spec_(spec), lr_(static_cast<float>(spec.adam.learning_rate)) {}

  std::string name() const override { return "Adam"; }
  float learning_rate() const override { return lr_; }
  void set_learning_rate(float lr) override {
    check_learning_rate(lr);
    lr_ = lr;
  }
  uint32_t step_count() const override { return step_; }

  json hyperparams() const override {
    json j = optimizer_spec_json(spec_);
    j["learning_rate"] = tidy_float(lr_);
    return j;
  }

  void plan_memory(MemoryPlan& plan, size_t n) const override {
    plan.add(who() + " moments", n, 2 * sizeof(float), true);
    plan.add(who() + " step counters", n, sizeof(uint32_t), true);
  }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    runs_ = param_runs(*this, n, segments);
    first_.assign(n, 0.0f);
    second_.assign(n, 0.0f);
    param_steps_.assign(n, 0);
    step_ = 0;
    mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    if (!allocated()) throw Error(who() + ": step() called before allocate()");
    const StepArgs args = check_step_args(*this, loss_scale, master, params, gradients);
    ++step_;
    with_step_types(args, [&](auto* p, const auto* g) { update(args, loss_scale, p, g); });
  }

  // ---- state: [first moments | second moments | param steps % 2^16 | param steps / 2^16] ----
  // (step counters are split so that every value is exact in a float)

  json state_header() const override { return adam_state::header(name(), n_params(), step_, lr_); }

  size_t state_size() const override { return adam_state::size(n_params()); }

  std::vector<float> state_data() const override {
    const size_t n = n_params();
    std::vector<float> out(state_size());
    std::copy(first_.begin(), first_.end(), out.begin());
    std::copy(second_.begin(), second_.end(), out.begin() + n);
    adam_state::pack_steps(param_steps_.data(), n, out.data());
    return out;
  }

  void check_state(const json& header, const float* data, size_t size) const override {
    check_header(header, size);
    adam_state::check_fields(*this, header, data);
  }


  void apply_state(const json& header, const float* data) override {
    const size_t n = n_params();
    step_ = static_cast<uint32_t>(header.at("current_step").get<uint64_t>());
    lr_ = static_cast<float>(header.at("learning_rate").get<double>());
    std::copy(data, data + n, first_.begin());
    std::copy(data + n, data + 2 * n, second_.begin());
    adam_state::unpack_steps(data, n, param_steps_.data());
  }

 private:
  // Everything one step needs, in the float values the update uses.
  struct Consts {
    float loss_scale, lr, non_matrix_factor, beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon, l2_reg;
    float non_matrix_l2_reg, relative_decay, absolute_decay, clipping, gradient_clipping, lower, upper;
    uint32_t step;
    float correction_at_step;  // bias correction for a counter equal to the global step
    bool skip_zero_grad;       // non-matrix params with a zero gradient keep their state
  };

  static float bias_correction(const Consts& c, uint32_t t) {
    const float tf = static_cast<float>(t);
    return std::sqrt(1.0f - std::pow(c.beta2, tf)) / (1.0f - std::pow(c.beta1, tf));
  }

  Consts consts(float loss_scale) const {
    const AdamSpec& a = spec_.adam;
    Consts c;
    c.loss_scale = loss_scale;
    c.lr = lr_;
    c.non_matrix_factor = static_cast<float>(a.non_matrix_learning_rate_factor);
    c.beta1 = static_cast<float>(a.beta1);
    c.beta2 = static_cast<float>(a.beta2);
    c.one_minus_beta1 = 1.0f - c.beta1;
    c.one_minus_beta2 = 1.0f - c.beta2;
    c.epsilon = static_cast<float>(a.epsilon);
    c.l2_reg = static_cast<float>(a.l2_reg);
    c.non_matrix_l2_reg = static_cast<float>(a.non_matrix_l2_reg);
    c.relative_decay = static_cast<float>(a.relative_decay);
    c.absolute_decay = static_cast<float>(a.absolute_decay);
    c.clipping = static_cast<float>(a.clipping_magnitude);
    c.gradient_clipping = static_cast<float>(a.gradient_clipping_magnitude);
    c.lower = 0.0f;
    c.upper = FLT_MAX;
    if (a.adabound) {
      // AdaBound's bounds on the per-element rate, tightening with the global step count.
      const float s = static_cast<float>(step_);
      c.lower = 0.1f - 0.1f / (c.one_minus_beta2 * s + 1.0f);
      c.upper = 0.1f + 0.1f / (c.one_minus_beta2 * s);
    }
    c.step = step_;
    c.correction_at_step = bias_correction(c, step_);
    c.skip_zero_grad = a.skip_zero_grad_non_matrix_params;
    return c;
  }

  template <typename P, typename G>
  void update(const StepArgs& args, float loss_scale, P* params, const G* gradients) {
    const Consts c = consts(loss_scale);
    const bool do_matrix = spec_.adam.optimize_matrix_params, do_other = spec_.adam.optimize_non_matrix_params;
    parallel_for(static_cast<int64_t>(args.n), kOptimizerGrain, [&](int64_t b, int64_t e) {
      for_each_run(runs_, static_cast<size_t>(b), static_cast<size_t>(e), [&](size_t rb, size_t re, bool matrix) {
        if (matrix && do_matrix) update_range<true>(c, rb, re, args.master, params, gradients);
        if (!matrix && do_other) update_range<false>(c, rb, re, args.master, params, gradients);
      });
    });
  }

  template <bool kMatrix, typename P, typename G>
  void update_range(const Consts& c, size_t begin, size_t end, float* master, P* params, const G* gradients) {
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
      lr *= t == c.step ? c.correction_at_step : bias_correction(c, t);
      const float rate = std::fmin(std::fmax(lr / (std::sqrt(v) + c.epsilon), c.lower), c.upper);
      const float decayed = (1.0f - c.relative_decay * lr) * w - std::copysign(c.absolute_decay * lr, w);
      float new_w = decayed - rate * m;
      if (c.clipping != 0.0f) new_w = std::fmin(std::fmax(new_w, -c.clipping), c.clipping);
      master[i] = new_w;
      if (params) params[i] = static_cast<P>(new_w);
    }
  }

  OptimizerSpec spec_;
  float lr_;
  uint32_t step_ = 0;
  std::vector<ParamRun> runs_;
  std::vector<float> first_, second_;
  std::vector<uint32_t> param_steps_;
};

}  // namespace

std::unique_ptr<CpuOptimizer> make_adam(const OptimizerSpec& spec) { return std::make_unique<Adam>(spec); }

}  // namespace tinyfuse::cpu
