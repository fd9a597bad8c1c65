#include "workloads/eikonal_loss_gpu.h"

#include <cuda_fp16.h>

namespace tinyfuse::bench {

namespace {

__device__ __forceinline__ float load(const GpuMatrix& m, int64_t r, int64_t c) {
  return m.half ? __half2float(static_cast<const __half*>(m.data)[r * m.ld + c]) : static_cast<const float*>(m.data)[r * m.ld + c];
}

__device__ __forceinline__ void store(const GpuMatrix& m, int64_t r, int64_t c, float v) {
  if (m.half)
    static_cast<__half*>(m.data)[r * m.ld + c] = __float2half_rn(v);
  else
    static_cast<float*>(m.data)[r * m.ld + c] = v;
}

constexpr int kThreads = 256;

__global__ void eikonal_loss_kernel(int64_t n_l1, int64_t n_eikonal, GpuMatrix f, const float* __restrict__ target,
                                    int64_t target_ld, GpuMatrix grad, double weight, double scale, GpuMatrix dL_df,
                                    GpuMatrix dL_dgrad, double* sums) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  double l1 = 0.0, eikonal = 0.0;
  if (r < n_l1) {
    const double d = double(load(f, r, 0)) - double(target[r * target_ld]);
    l1 = fabs(d);
    store(dL_df, r, 0, float(scale / double(n_l1) * (d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0)));
  } else if (r < n_l1 + n_eikonal) {
    const int64_t i = r - n_l1;
    const double g0 = load(grad, i, 0), g1 = load(grad, i, 1), g2 = load(grad, i, 2);
    const double norm = sqrt(g0 * g0 + g1 * g1 + g2 * g2);
    eikonal = (norm - 1) * (norm - 1);
    // d/dg (|g| - 1)^2 = 2 (|g| - 1) g / |g|.
    const double c = norm > 0 ? scale * weight / double(n_eikonal) * 2 * (norm - 1) / norm : 0.0;
    store(dL_dgrad, i, 0, float(c * g0));
    store(dL_dgrad, i, 1, float(c * g1));
    store(dL_dgrad, i, 2, float(c * g2));
  }
  for (int o = 16; o > 0; o /= 2) {
    l1 += __shfl_down_sync(0xffffffffu, l1, o);
    eikonal += __shfl_down_sync(0xffffffffu, eikonal, o);
  }
  __shared__ double warp_sums[2][kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[0][warp] = l1, warp_sums[1][warp] = eikonal;
  __syncthreads();
  if (threadIdx.x == 0) {
    double a = 0.0, b = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) a += warp_sums[0][w], b += warp_sums[1][w];
    if (a != 0.0) atomicAdd(sums, a);
    if (b != 0.0) atomicAdd(sums + 1, b);
  }
}

}  // namespace

cudaError_t queue_eikonal_workload_loss(int64_t n_l1, int64_t n_eikonal, GpuMatrix f, const float* target,
                                        int64_t target_ld, GpuMatrix grad, double weight, double scale,
                                        GpuMatrix dL_df, GpuMatrix dL_dgrad, double* sums, cudaStream_t stream) {
  const int64_t n = n_l1 + n_eikonal;
  if (n <= 0) return cudaSuccess;
  eikonal_loss_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      n_l1, n_eikonal, f, target, target_ld, grad, weight, scale, dL_df, dL_dgrad, sums);
  return cudaGetLastError();
}

}  // namespace tinyfuse::bench
