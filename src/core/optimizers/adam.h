// Adam with tiny-cuda-nn's semantics, its host half written once: hyperparameters, learning rate,
// the global step counter, the constants of each step (computed on the host in float, so every
// device's update starts from the same values) and the checkpoint state (adam_state.h). A backend
// derives from AdamOptimizer<its optimizer base> and gives the per-element update and the memory
// of the moments and per-parameter step counters.
//
// The update (one element; the backends compute it in float, operation by operation alike):
// a step counter per parameter (non-matrix parameters with a zero gradient are skipped entirely
// by default, e.g. untouched hash-grid entries), l2_reg on matrix parameters and
// non_matrix_l2_reg on the others, optional gradient clipping, epsilon added to sqrt(v) before
// bias correction, optional AdaBound bounds, relative / absolute weight decay and weight clipping.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/optimizers/adam_state.h"
#include "core/optimizers/stepped_optimizer.h"

namespace tinyfuse {

// Everything one step needs, in the float values the update uses. Plain data (kernels take it
// by value).
struct AdamConsts {
  float loss_scale, lr, non_matrix_factor, beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon, l2_reg;
  float non_matrix_l2_reg, relative_decay, absolute_decay, clipping, gradient_clipping, lower, upper;
  uint32_t step;
  float correction_at_step;  // bias correction for a counter equal to the global step
  bool do_matrix, do_other;  // optimize_matrix_params, optimize_non_matrix_params
  bool skip_zero_grad;       // non-matrix params with a zero gradient keep their state
};

// sqrt(1 - beta2^t) / (1 - beta1^t), in float on the host.
inline float adam_bias_correction(float beta1, float beta2, uint32_t t) {
  const float tf = static_cast<float>(t);
  return std::sqrt(1.0f - std::pow(beta2, tf)) / (1.0f - std::pow(beta1, tf));
}

// The constants of the step that makes the global step count `step`.
inline AdamConsts adam_consts(const AdamSpec& a, float lr, uint32_t step, float loss_scale) {
  AdamConsts c;
  c.loss_scale = loss_scale;
  c.lr = lr;
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
    const float s = static_cast<float>(step);
    c.lower = 0.1f - 0.1f / (c.one_minus_beta2 * s + 1.0f);
    c.upper = 0.1f + 0.1f / (c.one_minus_beta2 * s);
  }
  c.step = step;
  c.correction_at_step = adam_bias_correction(c.beta1, c.beta2, step);
  c.do_matrix = a.optimize_matrix_params;
  c.do_other = a.optimize_non_matrix_params;
  c.skip_zero_grad = a.skip_zero_grad_non_matrix_params;
  return c;
}

template <typename Base>
class AdamOptimizer : public SteppedOptimizer<Base> {
 public:
  explicit AdamOptimizer(const OptimizerSpec& spec) : SteppedOptimizer<Base>(spec, spec.adam.learning_rate) {}

  std::string name() const override { return "Adam"; }

  // The moments and per-parameter step counters allocate_state() allocates; a backend that holds
  // more adds it after these.
  void plan_memory(MemoryPlan& plan, size_t n) const override {
    const bool on_host = this->device() == Device::CPU;
    plan.add(this->who() + " moments", n, 2 * sizeof(float), on_host);
    plan.add(this->who() + " step counters", n, sizeof(uint32_t), on_host);
  }

  // ---- state: [first moments | second moments | param steps % 2^16 | param steps / 2^16] ----
  // (step counters are split so that every value is exact in a float)

  json state_header() const override { return adam_state::header(name(), this->n_params(), this->step_, this->lr_); }

  size_t state_size() const override { return adam_state::size(this->n_params()); }

  std::vector<float> state_data() const override {
    const size_t n = this->n_params();
    std::vector<float> out(state_size());
    std::vector<uint32_t> steps(n);
    read_moments(out.data(), out.data() + n, steps.data());
    adam_state::pack_steps(steps.data(), n, out.data());
    return out;
  }

  void check_state(const json& header, const float* data, size_t size) const override {
    this->check_header(header, size);
    this->check_step_and_rate(header);
    adam_state::check_data(*this, data);
  }

  void apply_state(const json& header, const float* data) override {
    const size_t n = this->n_params();
    std::vector<uint32_t> steps(n);
    adam_state::unpack_steps(data, n, steps.data());
    write_moments(data, data + n, steps.data());
    this->apply_step_and_rate(header);
  }

 protected:
  void update(const StepArgs& args, float loss_scale) final {
    update_elements(args, adam_consts(this->spec_.adam, this->lr_, this->step_, loss_scale));
  }

  // The backend's half: allocate_state() (the moments and step counters, zeroed), the per-element
  // update of every parameter (nothing to do when args.n is 0), and copies of the n first and
  // second moments and step counters, out and in.
  virtual void update_elements(const StepArgs& args, const AdamConsts& c) = 0;
  virtual void read_moments(float* first, float* second, uint32_t* steps) const = 0;
  virtual void write_moments(const float* first, const float* second, const uint32_t* steps) = 0;
};

}  // namespace tinyfuse
