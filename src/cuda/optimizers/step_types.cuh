// Element types of a GPU optimizer step's arguments, for the kernels.
#pragma once

#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"

namespace tinyfuse::cuda {

// Calls fn(P* params, const G* gradients) with P, G in {float, __half} by the arguments'
// dtypes; params is a null float* when it is the master buffer itself.
template <typename Args, typename Fn>
void with_gpu_step_types(const Args& a, Fn&& fn) {
  auto with_params = [&](const auto* g) {
    if (a.params_dtype == DType::F16)
      fn(static_cast<__half*>(a.params), g);
    else
      fn(static_cast<float*>(a.params), g);
  };
  if (a.gradients_dtype == DType::F16)
    with_params(static_cast<const __half*>(a.gradients));
  else
    with_params(static_cast<const float*>(a.gradients));
}

}  // namespace tinyfuse::cuda
