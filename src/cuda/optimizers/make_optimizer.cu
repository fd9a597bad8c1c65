// The GPU optimizer of a checked spec (the dispatch on its kind is core/optimizers/build_optimizer.h).
#include "core/optimizers/build_optimizer.h"
#include "cuda/backend.h"
#include "cuda/optimizers/gpu_optimizer.h"

namespace tinyfuse::cuda {

std::unique_ptr<GpuOptimizer> make_gpu_optimizer(const OptimizerSpec& spec) {
  return build_optimizer<GpuOptimizer>(spec, {&make_adam, &make_sgd, &make_ema, &make_gpu_optimizer});
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec) { return make_gpu_optimizer(spec); }

}  // namespace tinyfuse::cuda
