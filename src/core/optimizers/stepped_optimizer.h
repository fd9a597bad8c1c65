// What Adam and SGD share on every device: their config, their own learning rate and global step
// counter (and those two in the checkpoint state's header), allocate() and step().
#pragma once

#include <cfloat>
#include <cstdint>
#include <string>
#include <vector>

#include "core/optimizers/optimizer_base.h"

namespace tinyfuse {

// `Base` is the backend's optimizer base (derived from OptimizerBase, giving device()).
template <typename Base>
class SteppedOptimizer : public Base {
 public:
  SteppedOptimizer(const OptimizerSpec& spec, double learning_rate)
      : Base(spec.path), spec_(spec), lr_(static_cast<float>(learning_rate)) {}

  float learning_rate() const override { return lr_; }
  void set_learning_rate(float lr) override {
    this->check_learning_rate(lr);
    lr_ = lr;
  }
  uint32_t step_count() const override { return step_; }

  json hyperparams() const override {
    json j = optimizer_spec_json(spec_);
    j["learning_rate"] = tidy_float(lr_);
    return j;
  }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    const std::vector<ParamRun> runs = param_runs(*this, n, segments);  // rejects segments that do not fit
    allocate_state(n, runs);
    step_ = 0;
    this->mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    const StepArgs args = this->begin_step(loss_scale, master, params, gradients);
    ++step_;
    update(args, loss_scale);
  }

 protected:
  // State of n parameters, zeroed; `runs` says which elements are matrix parameters.
  virtual void allocate_state(size_t /*n*/, const std::vector<ParamRun>& /*runs*/) {}
  // The update of every parameter by the step that made the global step count step_.
  virtual void update(const StepArgs& args, float loss_scale) = 0;

  // The state header's "current_step" and "learning_rate": checked, then taken.
  void check_step_and_rate(const json& header) const {
    if (header_uint(*this, header, "current_step") > UINT32_MAX) this->state_error("current_step does not fit 32 bits");
    const double lr = header_number(*this, header, "learning_rate");
    if (lr < 0 || lr > FLT_MAX) this->state_error("learning_rate " + std::to_string(lr) + " is not a float >= 0");
  }
  void apply_step_and_rate(const json& header) {
    step_ = static_cast<uint32_t>(header.at("current_step").get<uint64_t>());
    lr_ = static_cast<float>(header.at("learning_rate").get<double>());
  }

  const OptimizerSpec spec_;
  float lr_;
  uint32_t step_ = 0;
};

}  // namespace tinyfuse
