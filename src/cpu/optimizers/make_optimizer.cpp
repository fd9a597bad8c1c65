// Building CPU optimizers from their config: parsing and checking live in core/optimizer_config.
#include "core/optimizer_config.h"
#include "cpu/optimizers/cpu_optimizer.h"
#include "cpu/optimizers/optimizers.h"

namespace tinyfuse::cpu {

std::unique_ptr<CpuOptimizer> make_cpu_optimizer(const OptimizerSpec& spec) {
  switch (spec.kind) {
    case OptimizerKind::Adam: return make_adam(spec);
    case OptimizerKind::SGD: return make_sgd(spec);
    case OptimizerKind::ExponentialDecay: return make_exponential_decay(spec);
    case OptimizerKind::EMA: return make_ema(spec);
    case OptimizerKind::Composite: return make_composite(spec);
  }
  throw Error("unknown optimizer kind");  // not reached: the parser only yields the kinds above
}

std::unique_ptr<Optimizer> make_optimizer(const json& config, const std::string& path) {
  return make_cpu_optimizer(parse_optimizer_config(config, path));
}

}  // namespace tinyfuse::cpu
