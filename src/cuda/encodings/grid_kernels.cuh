// The grid kernels' host-side launchers, one file of kernels each: grid_forward.cu (values),
// grid_input_gradients.cu (dL/dinput, the second-order dL/d(dL/doutput) and dL2/dinput) and
// grid_param_gradients.cu (parameter gradients of both orders, fast or deterministic).
// All work is queued on job.stream; none synchronises the host.
#pragma once

#include "cuda/encodings/grid_device.cuh"
#include "tinyfuse/common.h"

namespace tinyfuse::cuda::grid {

struct Job {
  Launch g;
  uint32_t dims, features;
  int64_t batch;
  gpuStream_t stream;
};

// Parameters the kernels read: F32 or F16 (param_dtype), n_params of them.
struct Params {
  const void* data;
  DType dtype;
};

// output(b, l * F + f) for every level; padding columns [n_out, padded) get 0.
void forward(const Job& job, Params params, const float* x, int64_t ldx, Matrix output, uint32_t n_out,
             uint32_t padded);

// dL/dx (batch, dims) F32 from dL/doutput; 0 for Nearest.
void input_gradients(const Job& job, Params params, const float* x, int64_t ldx, Matrix dL_doutput, float* dL_dx,
                     int64_t ld_dx);

// Second order: dL2/d(dL/doutput) = sum over corners of grid_corner_directional_weight(v) * features,
// v = dL2/d(dL/dx) (batch, dims) F32; padding columns get 0.
void second_order_output_gradients(const Job& job, Params params, const float* x, int64_t ldx, const float* v,
                                   int64_t ldv, Matrix out, uint32_t n_out, uint32_t padded);

// Second order: dL2/dx (batch, dims) F32 through the interpolation's Hessian, sum over levels and
// corners of grid_corner_hessian_weight(v) * features·dL/doutput; 0 for Nearest.
void second_order_input_gradients(const Job& job, Params params, const float* x, int64_t ldx, const float* v,
                                  int64_t ldv, Matrix dL_doutput, float* dL_dx, int64_t ld_dx);

// Parameter gradients: first order (v null: corner weight * dL/doutput) or second order
// (v = dL2/d(dL/dx): directional weight * dL/doutput), summed in FP32 with float atomics, or
// (deterministic) as 64-bit fixed-point integers whose sum does not depend on the order, then
// written (or added, `accumulate`) to `gradients` (n_params of param_dtype). A second-order request
// may carry a first-order one's dL/doutput (dL_doutput_first) where first_order_rides_on_second():
// both terms are then added in one pass.
struct GradientRequest {
  const float* x;
  int64_t ldx;
  Matrix dL_doutput;
  const float* v;  // null: first order
  int64_t ldv;
  Matrix dL_doutput_first;  // data null: none
  void* gradients;
  DType dtype;
  size_t n_params;
  const uint32_t* level_entries;  // host: each level's table entries (job.g.n_levels of them)
  bool accumulate;
  bool deterministic;
};
void param_gradients(const Job& job, const GradientRequest& request);

// Whether a second-order request can carry a first-order term: the fast sums (the deterministic
// ones bound each level's total by one order's weights) of a grid whose first order spreads a
// record over every corner of its cell (not Nearest, not stochastic), as the second order does.
inline bool first_order_rides_on_second(const Launch& g, bool deterministic) {
  return !deterministic && !g.stochastic && g.interpolation != GridInterpolation::Nearest;
}

}  // namespace tinyfuse::cuda::grid
