// Building GPU optimizers from their config: parsing and checking live in core/optimizer_config,
// the wrappers without per-element math (ExponentialDecay, Composite) in core/optimizers.
#include "core/optimizer_config.h"
#include "core/optimizers/composite.h"
#include "core/optimizers/exponential_decay.h"
#include "cuda/backend.h"
#include "cuda/optimizers/gpu_optimizer.h"

namespace tinyfuse::cuda {

std::unique_ptr<GpuOptimizer> make_gpu_optimizer(const OptimizerSpec& spec) {
  switch (spec.kind) {
    case OptimizerKind::Adam: return make_adam(spec);
    case OptimizerKind::SGD: return make_sgd(spec);
    case OptimizerKind::ExponentialDecay:
      return std::make_unique<ExponentialDecayOptimizer<GpuOptimizer>>(spec, &make_gpu_optimizer);
    case OptimizerKind::EMA: return make_ema(spec);
    case OptimizerKind::Composite: return std::make_unique<CompositeOptimizer<GpuOptimizer>>(spec, &make_gpu_optimizer);
  }
  throw Error("unknown optimizer kind");  // not reached: the parser only yields the kinds above
}

std::unique_ptr<Optimizer> make_optimizer(const json& config, const std::string& path) {
  return make_gpu_optimizer(parse_optimizer_config(config, path));
}

}  // namespace tinyfuse::cuda
