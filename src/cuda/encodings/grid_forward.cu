// Grid forward: one thread per (record, level), the level index fastest, so the threads of a warp
// write whole consecutive output rows (coalesced) in the row-major layout the network reads.
#include "cuda/encodings/grid_interpolate.cuh"
#include "cuda/encodings/grid_kernels.cuh"

namespace tinyfuse::cuda::grid {

namespace {

template <typename T, uint32_t D, uint32_t F>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
forward_kernel(Launch g, int64_t batch, const T* __restrict__ params, bool vec, bool pairs,
               const float* __restrict__ x, int64_t ldx, Matrix out, uint32_t n_out, uint32_t padded) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * g.n_levels) return;
  int64_t b;
  uint32_t l;
  record_and_level(i, g.n_levels, b, l);
  const LevelInfo L = g.levels[l];
  const Cell<D> c = locate<D>(x, ldx, b, L.scale, g.interpolation);

  float acc[F] = {};
  interpolate<T, D, F>(g, L, c, params, vec, pairs, acc);
#pragma unroll
  for (uint32_t f = 0; f < F; ++f) out.store(b, l * F + f, acc[f]);
  if (l == 0)
    for (uint32_t j = n_out; j < padded; ++j) out.store(b, j, 0.0f);
}

template <typename T>
void launch(const Job& job, const T* params, const float* x, int64_t ldx, Matrix out, uint32_t n_out, uint32_t padded) {
  const int64_t threads = job.batch * job.g.n_levels;
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    forward_kernel<T, D, F><<<blocks_for_threads(threads), kThreadsPerBlock, 0, job.stream>>>(
        job.g, job.batch, params, features_aligned<T, F>(params), reinterpret_cast<uintptr_t>(params) % 16 == 0, x, ldx,
        out, n_out, padded);
  });
  TF_GPU_CHECK_LAUNCH("grid forward_kernel");
}

}  // namespace

void forward(const Job& job, Params params, const float* x, int64_t ldx, Matrix output, uint32_t n_out,
             uint32_t padded) {
  if (job.batch == 0) return;
  if (params.dtype == DType::F16)
    launch(job, static_cast<const __half*>(params.data), x, ldx, output, n_out, padded);
  else
    launch(job, static_cast<const float*>(params.data), x, ldx, output, n_out, padded);
}

}  // namespace tinyfuse::cuda::grid
