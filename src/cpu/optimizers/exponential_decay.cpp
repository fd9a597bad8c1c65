// ExponentialDecay on the CPU: the device-neutral wrapper (core/optimizers/exponential_decay.h)
// around a CPU optimizer.
#include "core/optimizers/exponential_decay.h"
#include "cpu/optimizers/cpu_optimizer.h"

namespace tinyfuse::cpu {

std::unique_ptr<CpuOptimizer> make_exponential_decay(const OptimizerSpec& spec) {
  return std::make_unique<ExponentialDecayOptimizer<CpuOptimizer>>(spec, &make_cpu_optimizer);
}

}  // namespace tinyfuse::cpu
