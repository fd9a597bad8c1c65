// What the CPU optimizers share: a base class (the device-neutral OptimizerBase on the CPU) and
// the element types of step()'s arguments. The checked arguments, the matrix / non-matrix layout
// and the state-header helpers are device-neutral (core/optimizers/optimizer_base.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/optimizer_config.h"
#include "core/optimizers/optimizer_base.h"
#include "tinyfuse/optimizer.h"

namespace tinyfuse::cpu {

// Elements per chunk of the elementwise updates.
constexpr int64_t kOptimizerGrain = 1 << 14;

// Base of every CPU optimizer. load_state() checks the whole state (nested optimizers included)
// before changing anything, so a rejected state leaves the optimizer as it was.
class CpuOptimizer : public OptimizerBase {
 public:
  using OptimizerBase::OptimizerBase;
  Device device() const override { return Device::CPU; }
};

std::unique_ptr<CpuOptimizer> make_cpu_optimizer(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_adam(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_sgd(const OptimizerSpec& spec);
std::unique_ptr<CpuOptimizer> make_ema(const OptimizerSpec& spec);

// ---- step() arguments --------------------------------------------------------------------

// Calls fn(P* params, const G* gradients) with the arguments' element types; params is a null
// float* when they alias the master weights.
template <typename Fn>
void with_step_types(const StepArgs& a, Fn&& fn) {
  auto with_params = [&](const auto* g) {
    if (a.params_dtype == DType::F64)
      fn(static_cast<double*>(a.params), g);
    else
      fn(static_cast<float*>(a.params), g);
  };
  if (a.gradients_dtype == DType::F64)
    with_params(static_cast<const double*>(a.gradients));
  else
    with_params(static_cast<const float*>(a.gradients));
}

}  // namespace tinyfuse::cpu
