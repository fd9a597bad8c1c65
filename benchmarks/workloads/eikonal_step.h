// W4e's training step (an Eikonal "step" in the workload file):
//   rows [0, n/2):  L1 of f against the target (W4's points and exact distances);
//   rows [n/2, n):  weight * (|grad_x f| - 1)^2 (the eikonal term; their targets are unused);
//   loss = mean |f - t| over the first + weight * mean (|grad_x f| - 1)^2 over the second.
// Each half is its own forward, so the work follows the loss: the L1 rows a forward and a
// backward into the parameters; the eikonal rows a forward with the input gradients prepared, the
// input gradient grad_x f (backward of ones) and backward_backward_input into the parameters.
// Then the optimizer step.
// The loss sits between the two passes: on a GPU in the benchmark's own kernel
// (eikonal_loss_gpu.cu), as a user's loss would, with the loss read back only when asked; on the
// CPU in eikonal_workload_loss.
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
  // trainer's gradient buffer (queued on the step's stream on a GPU).
  void gradients(const TensorView& input, const TensorView& target);
  // gradients(), then the optimizer step.
  void run(const TensorView& input, const TensorView& target);

  // The last step's loss (on a GPU: waits for the step and reads it back).
  double last_loss() const;
  // The last step's grad_x f (batch, 3) as FP32 on the host, formed on the eikonal rows only (the
  // L1 rows' entries are 0); on a GPU read back when asked.
  const std::vector<float>& input_gradients() const;

 private:
  WorkloadModel& m_;
  int64_t batch_;
  int64_t n_l1_;  // rows [0, n_l1_) take the L1 term, the rest the eikonal term
  int64_t width_;
  double weight_;
  bool on_gpu_;
  Buffer out_, ones_, grad_dev_, d_out_dev_, v_dev_, sums_dev_;
  TensorView out_v_, ones_v_, grad_v_, d_out_v_, v_v_;
  std::vector<float> f_, target_, d_out_, v_;
  mutable std::vector<float> grad_;
  mutable double last_loss_ = 0;
  mutable bool loss_on_device_ = false, grad_on_device_ = false;  // not yet read back
};

}  // namespace tinyfuse::bench
