// ExponentialDecay: a learning-rate schedule around a nested optimizer, with tiny-cuda-nn's
// timing. Before each update, with s = updates already done: s == 0 resets the factor to 1, and
// s >= decay_start, (s - decay_start) % decay_interval == 0, s <= decay_end multiplies it by
// decay_base. So the first decayed update is update number decay_start + 1.
//
// Device-neutral: it only talks to the nested optimizer. `Base` is the backend's optimizer base
// (derived from OptimizerBase, giving device()); `make` builds the nested optimizer.
#pragma once

#include <cfloat>
#include <cmath>
#include <memory>

#include "core/optimizers/wrapping_optimizer.h"

namespace tinyfuse {

template <typename Base>
class ExponentialDecayOptimizer final : public WrappingOptimizer<Base> {
  using WrappingOptimizer<Base>::nested_;

 public:
  ExponentialDecayOptimizer(const OptimizerSpec& spec, typename WrappingOptimizer<Base>::Maker make)
      : WrappingOptimizer<Base>(spec, make) {
    base_lr_ = nested_->learning_rate();
  }

  std::string name() const override { return "ExponentialDecay"; }
  float learning_rate() const override { return base_lr_ * factor_; }
  void set_learning_rate(float lr) override {
    this->check_learning_rate(lr);
    const float base = lr / factor_;
    if (factor_ == 0.0f || !std::isfinite(base)) {
      // The factor has decayed to (nearly) nothing: restart it from lr; later decays still apply.
      factor_ = 1.0f;
      base_lr_ = lr;
    } else {
      base_lr_ = base;
    }
  }

  void plan_memory(MemoryPlan& plan, size_t n) const override { nested_->plan_memory(plan, n); }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    nested_->allocate(n, segments);
    factor_ = 1.0f;
    this->mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    if (!this->allocated()) throw Error(this->who() + ": step() called before allocate()");
    const ExponentialDecaySpec& d = this->spec_.exponential_decay;
    const uint32_t s = nested_->step_count();
    float factor = factor_;
    if (s == 0) factor = 1.0f;
    if (s >= d.decay_start && (s - d.decay_start) % d.decay_interval == 0 && s <= d.decay_end)
      factor *= static_cast<float>(d.decay_base);
    nested_->set_learning_rate(base_lr_ * factor);
    nested_->step(loss_scale, master, params, gradients);
    factor_ = factor;  // only once the nested step went through
  }

  // State: base learning rate and factor in the header, then the nested optimizer's state.
  json state_header() const override {
    return {{"otype", name()},
            {"n_params", this->n_params()},
            {"base_learning_rate", base_lr_},
            {"factor", factor_},
            {"nested", nested_->state_header()}};
  }
  size_t state_size() const override { return nested_->state_size(); }
  std::vector<float> state_data() const override { return nested_->state_data(); }

  void check_state(const json& header, const float* data, size_t size) const override {
    this->check_header(header, size);
    for (const char* key : {"base_learning_rate", "factor"}) {
      const double v = header_number(*this, header, key);
      if (v < 0 || v > FLT_MAX) this->state_error(std::string(key) + " " + std::to_string(v) + " is not a float >= 0");
    }
    nested_->check_state(header_field(*this, header, "nested"), data, size);
  }

  void apply_state(const json& header, const float* data) override {
    base_lr_ = static_cast<float>(header.at("base_learning_rate").get<double>());
    factor_ = static_cast<float>(header.at("factor").get<double>());
    nested_->apply_state(header.at("nested"), data);
  }

 private:
  float base_lr_ = 0.0f;
  float factor_ = 1.0f;
};

}  // namespace tinyfuse
