// Composite on the CPU: the device-neutral wrapper (core/optimizers/composite.h) around CPU
// optimizers.
#include "core/optimizers/composite.h"
#include "cpu/optimizers/cpu_optimizer.h"

namespace tinyfuse::cpu {

std::unique_ptr<CpuOptimizer> make_composite(const OptimizerSpec& spec) {
  return std::make_unique<CompositeOptimizer<CpuOptimizer>>(spec, &make_cpu_optimizer);
}

}  // namespace tinyfuse::cpu
