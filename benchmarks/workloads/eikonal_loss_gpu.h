// W4e's loss (eikonal_step.h: L1 on rows [0, n_l1), weight * (|grad_x f| - 1)^2 on the rest) on
// the GPU, so the step stays on the device as a user's own loss kernel would: each step queues it
// between the passes, and the host reads the loss only when asked.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace tinyfuse::bench {

// A row-major matrix on the GPU: FP32 or FP16 elements, `ld` elements between rows.
struct GpuMatrix {
  void* data;
  int64_t ld;
  bool half;
};

// Row r < n_l1: |f[r, 0] - target[r]| into sums[0], dL_df[r, 0] = scale / n_l1 * sign; row
// r = n_l1 + i: (|grad[i]| - 1)^2 into sums[1], dL_dgrad[i] = scale * weight / n_eikonal *
// 2 (|g| - 1) g / |g| (0 where |g| is 0). Other columns of dL_df are left as they are (zero).
// sums: two doubles the caller zeroes; the loss is sums[0] / n_l1 + weight * sums[1] / n_eikonal.
cudaError_t queue_eikonal_workload_loss(int64_t n_l1, int64_t n_eikonal, GpuMatrix f, const float* target,
                                        int64_t target_ld, GpuMatrix grad, double weight, double scale,
                                        GpuMatrix dL_df, GpuMatrix dL_dgrad, double* sums, cudaStream_t stream);

}  // namespace tinyfuse::bench
