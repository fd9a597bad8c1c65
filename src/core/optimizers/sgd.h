// Plain SGD with tiny-cuda-nn's semantics, its host half written once: every parameter (matrix or
// not, zero gradient or not) takes w -= learning_rate * (g / loss_scale + l2_reg * w), in float.
// A backend derives from SgdOptimizer<its optimizer base> and gives the per-element update.
#pragma once

#include <cstdint>
#include <vector>

#include "core/optimizers/stepped_optimizer.h"

namespace tinyfuse {

template <typename Base>
class SgdOptimizer : public SteppedOptimizer<Base> {
 public:
  explicit SgdOptimizer(const OptimizerSpec& spec) : SteppedOptimizer<Base>(spec, spec.sgd.learning_rate) {}

  std::string name() const override { return "SGD"; }
  void plan_memory(MemoryPlan&, size_t) const override {}  // no state

  // State: the step counter and learning rate (in the header); no per-parameter data.
  json state_header() const override {
    return {{"otype", name()},
            {"n_params", this->n_params()},
            {"current_step", this->step_},
            {"learning_rate", tidy_float(this->lr_)}};
  }
  size_t state_size() const override { return 0; }
  std::vector<float> state_data() const override { return {}; }

  void check_state(const json& header, const float*, size_t size) const override {
    this->check_header(header, size);
    this->check_step_and_rate(header);
  }

  void apply_state(const json& header, const float*) override { this->apply_step_and_rate(header); }

 protected:
  void update(const StepArgs& args, float loss_scale) final {
    update_elements(args, loss_scale, this->lr_, static_cast<float>(this->spec_.sgd.l2_reg));
  }

  // The backend's half: w -= lr * (g / loss_scale + l2 * w) for every parameter (nothing to do
  // when args.n is 0).
  virtual void update_elements(const StepArgs& args, float loss_scale, float lr, float l2) = 0;
};

}  // namespace tinyfuse
