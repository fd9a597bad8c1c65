// The CPU optimizer of a checked spec (the dispatch on its kind is core/optimizers/build_optimizer.h).
#include "core/optimizers/build_optimizer.h"
#include "cpu/optimizers/cpu_optimizer.h"

namespace tinyfuse::cpu {

std::unique_ptr<CpuOptimizer> make_cpu_optimizer(const OptimizerSpec& spec) {
  return build_optimizer<CpuOptimizer>(spec, {&make_adam, &make_sgd, &make_ema, &make_cpu_optimizer});
}

}  // namespace tinyfuse::cpu
