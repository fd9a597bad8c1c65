// Building an optimizer from its checked spec, once for every backend: the wrappers without
// per-element math (ExponentialDecay, Composite) are core's, the others the backend's. Nested
// optimizers are built by `makers.any`, the backend's own entry point, which calls this again.
#pragma once

#include <memory>

#include "core/optimizers/composite.h"
#include "core/optimizers/exponential_decay.h"

namespace tinyfuse {

// `Base` is the backend's optimizer base (derived from OptimizerBase, giving device()).
template <typename Base>
struct OptimizerMakers {
  using Maker = std::unique_ptr<Base> (*)(const OptimizerSpec&);
  Maker adam, sgd, ema;
  Maker any;  // any spec: the backend's entry point
};

template <typename Base>
std::unique_ptr<Base> build_optimizer(const OptimizerSpec& spec, const OptimizerMakers<Base>& makers) {
  switch (spec.kind) {
    case OptimizerKind::Adam: return makers.adam(spec);
    case OptimizerKind::SGD: return makers.sgd(spec);
    case OptimizerKind::ExponentialDecay: return std::make_unique<ExponentialDecayOptimizer<Base>>(spec, makers.any);
    case OptimizerKind::EMA: return makers.ema(spec);
    case OptimizerKind::Composite: return std::make_unique<CompositeOptimizer<Base>>(spec, makers.any);
  }
  throw Error("unknown optimizer kind");  // not reached: the parser only yields the kinds above
}

}  // namespace tinyfuse
