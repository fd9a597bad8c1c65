// What the optimizers around one nested optimizer (ExponentialDecay, EMA) share on every device:
// their config, the nested optimizer (built by the backend's maker), and what passes through to
// it unless the wrapper says otherwise.
#pragma once

#include <memory>

#include "core/optimizers/optimizer_base.h"

namespace tinyfuse {

// `Base` is the backend's optimizer base (derived from OptimizerBase, giving device()).
template <typename Base>
class WrappingOptimizer : public Base {
 public:
  using Maker = std::unique_ptr<Base> (*)(const OptimizerSpec&);

  WrappingOptimizer(const OptimizerSpec& spec, Maker make)
      : Base(spec.path), spec_(spec), nested_(make(spec.nested.at(0))) {}

  uint32_t step_count() const override { return nested_->step_count(); }
  bool has_inference_params() const override { return nested_->has_inference_params(); }
  void write_inference_params(const TensorView& out) const override { nested_->write_inference_params(out); }

  json hyperparams() const override {
    json j = optimizer_spec_json(spec_);
    j["nested"] = nested_->hyperparams();
    return j;
  }

 protected:
  const OptimizerSpec spec_;
  const std::unique_ptr<Base> nested_;
};

}  // namespace tinyfuse
