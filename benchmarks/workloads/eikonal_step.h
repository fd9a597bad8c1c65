// W4e's training step (an Eikonal "step" in the workload file):
//   rows [0, n/2):  L1 of f against the target (W4's points and exact distances);
//   rows [n/2, n):  weight * (|grad_x f| - 1)^2 (the eikonal term; their targets are unused);
//   loss = mean |f - t| over the first + weight * mean (|grad_x f| - 1)^2 over the second.
// Each half is its own forward, so the work follows the loss: the L1 rows a forward and a
// backward into the parameters; the eikonal rows a forward with the input gradients prepared, the
// input gradient grad_x f (backward of ones) and backward_backward_input into the parameters.
// Then the optimizer step.
// The loss sits between the two passes on the host, as in learn-sdf (the library has no device
// kernel for it): on a GPU each step copies f and grad_x f down and their gradients up.
#pragma once

#include <cstdint>
#include <vector>

#include "tinyfuse/buffer.h"
#include "workloads/model.h"

namespace tinyfuse::bench {

// The loss above for `n` rows: f at f[r * f_stride], grad (n, 3), target (n). When dL_df and
// dL_dgrad are not null, writes the loss's gradients times `scale` (dL_df at r * f_stride, 0 on the
// eikonal rows; dL_dgrad (n, 3), 0 on the L1 rows; where |grad| is 0 the eikonal term gives none).
// Computed in double; T = float (the step) or double (the FP64 check).
template <typename T>
double eikonal_workload_loss(int64_t n, const T* f, int64_t f_stride, const T* grad, const float* target,
                             double eikonal_weight, double scale, float* dL_df, float* dL_dgrad);

class EikonalStep {
 public:
  // Buffers for batches of `batch` rows of model `m` (not owned; it must outlive the step), on
  // `stream`.
  EikonalStep(WorkloadModel& m, int64_t batch, double eikonal_weight, Stream stream);

  // The gradients of one step on (batch, 3) inputs and (batch, 1) targets, overwriting the
  // trainer's gradient buffer; returns the loss.
  double gradients(const TensorView& input, const TensorView& target);
  // gradients(), then the optimizer step.
  double run(const TensorView& input, const TensorView& target);

  double last_loss() const { return last_loss_; }
  // The last step's f (batch, padded output width) and grad_x f (batch, 3), as FP32 on the host;
  // grad_x f is formed on the eikonal rows only (the L1 rows' entries are 0).
  const std::vector<float>& values() const { return f_; }
  const std::vector<float>& input_gradients() const { return grad_; }

 private:
  WorkloadModel& m_;
  int64_t batch_;
  int64_t n_l1_;  // rows [0, n_l1_) take the L1 term, the rest the eikonal term
  int64_t width_;
  double weight_;
  Buffer out_, ones_, grad_dev_, d_out_dev_, v_dev_;
  TensorView out_v_, ones_v_, grad_v_, d_out_v_, v_v_;
  std::vector<float> f_, grad_, target_, d_out_, v_;
  double last_loss_ = 0;
};

}  // namespace tinyfuse::bench
