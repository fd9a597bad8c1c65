// Element types of a GPU optimizer step's arguments, for the kernels.
#pragma once

#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"

namespace tinyfuse::cuda {

// Calls fn(P* params, const G* gradients) with P, G in {float, __half, __nv_bfloat16} by the
// arguments' dtypes; params is a null float* when it is the master buffer itself. (Models keep
// params and gradients in one dtype, so only the matching pairs are instantiated.)
template <typename Fn>
void with_gpu_step_types(const StepArgs& a, Fn&& fn) {
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

// The updated weight into the FP32 master weights and, where they are a separate buffer, into
// the model's params (rounded to P).
template <typename P>
__device__ __forceinline__ void store_weight(float* __restrict__ master, P* __restrict__ params, int64_t i, float w) {
  master[i] = w;
  if (params) params[i] = from_float<P>(w);
}

// Calls launch(n, params, gradients) as with_gpu_step_types when there is anything to update.
template <typename Launch>
void launch_step(const StepArgs& a, Launch&& launch) {
  if (a.n == 0) return;
  with_gpu_step_types(a, [&](auto* p, const auto* g) { launch(static_cast<int64_t>(a.n), p, g); });
}

}  // namespace tinyfuse::cuda
