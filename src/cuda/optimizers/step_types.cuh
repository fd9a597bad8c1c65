// Element types of a GPU optimizer step's arguments, for the kernels.
#pragma once

#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"

namespace tinyfuse::cuda {

// Calls fn(P* params, const G* gradients) with P, G in {float, __half, __nv_bfloat16} by the
// arguments' dtypes; params is a null float* when it is the master buffer itself. (Models keep
// params and gradients in one dtype, so only the matching pairs are instantiated.)
template <typename Args, typename Fn>
void with_gpu_step_types(const Args& a, Fn&& fn) {
  const bool params_16 = a.params && (a.params_dtype == DType::F16 || a.params_dtype == DType::BF16);
  const bool grads_16 = a.gradients_dtype == DType::F16 || a.gradients_dtype == DType::BF16;
  if (params_16 && grads_16 && a.params_dtype != a.gradients_dtype)
    throw UnsupportedError("GPU optimizer step: params in " + to_string(a.params_dtype) + " with gradients in " +
                           to_string(a.gradients_dtype) + "; 16-bit params and gradients must share one dtype");
  if (a.gradients_dtype == DType::F16) {
    if (a.params_dtype == DType::F16) return fn(static_cast<__half*>(a.params), static_cast<const __half*>(a.gradients));
    return fn(static_cast<float*>(a.params), static_cast<const __half*>(a.gradients));
  }
  if (a.gradients_dtype == DType::BF16) {
    if (a.params_dtype == DType::BF16)
      return fn(static_cast<__nv_bfloat16*>(a.params), static_cast<const __nv_bfloat16*>(a.gradients));
    return fn(static_cast<float*>(a.params), static_cast<const __nv_bfloat16*>(a.gradients));
  }
  if (a.params_dtype == DType::F16) return fn(static_cast<__half*>(a.params), static_cast<const float*>(a.gradients));
  if (a.params_dtype == DType::BF16)
    return fn(static_cast<__nv_bfloat16*>(a.params), static_cast<const float*>(a.gradients));
  fn(static_cast<float*>(a.params), static_cast<const float*>(a.gradients));
}

}  // namespace tinyfuse::cuda
