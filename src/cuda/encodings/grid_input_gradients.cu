// Gradients that flow back to the grid's inputs and, in the second-order pass, to dL/doutput.
// Neither touches the parameter gradients, so both are plain gathers: bitwise repeatable.
//
// dL/dx: one thread per record looping over the levels in order (a fixed summation order, no
// atomics). For each corner, the features dotted with dL/doutput are weighted by
// d(corner weight)/dx[d] (grid_corner_weight_dx) and summed into each axis.
// Second order: one thread per (record, level), as the forward pass, writing F values of
// dL2/d(dL/doutput) = sum over corners of grid_corner_directional_weight(v) * features; and, as
// dL/dx, one thread per record for dL2/dx = sum over levels and corners of
// grid_corner_hessian_weight(v) * features·dL/doutput.
#include "cuda/encodings/grid_kernels.cuh"

namespace tinyfuse::cuda::grid {

namespace {

// The features of each of the cell's 2^D corners in level `l` dotted with row `b`'s dL/doutput of
// that level: what both input-gradient passes weight, per corner.
template <typename T, uint32_t D, uint32_t F>
__device__ __forceinline__ void corner_dots(const Launch& g, const LevelInfo& L, const Cell<D>& c, const T* params,
                                            bool vec, const Matrix& dy, int64_t b, uint32_t l, float* dots) {
  float gv[F], feat[F];
#pragma unroll
  for (uint32_t f = 0; f < F; ++f) gv[f] = dy.load(b, l * F + f);
  uint32_t v[D];
#pragma unroll
  for (uint32_t k = 0; k < (1u << D); ++k) {
    corner_vertex<D>(c, k, v);
    load_features<T, F>(params + size_t(entry_of<D>(g, L, v)) * F, vec, feat);
    float dot = 0.0f;
#pragma unroll
    for (uint32_t f = 0; f < F; ++f) dot = fmaf(feat[f], gv[f], dot);
    dots[k] = dot;
  }
}

template <typename T, uint32_t D, uint32_t F>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
input_gradient_kernel(Launch g, int64_t batch, const T* __restrict__ params, bool vec,
                      const float* __restrict__ x, int64_t ldx, Matrix dy, float* __restrict__ dx,
                      int64_t ld_dx) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  float acc[D] = {};
  if (g.interpolation != GridInterpolation::Nearest) {  // Nearest is piecewise constant: gradient 0
    for (uint32_t l = 0; l < g.n_levels; ++l) {
      const LevelInfo L = g.levels[l];
      const Cell<D> c = locate<D>(x, ldx, b, L.scale, g.interpolation);
      float dots[1u << D];
      corner_dots<T, D, F>(g, L, c, params, vec, dy, b, l, dots);
#pragma unroll
      for (uint32_t k = 0; k < (1u << D); ++k)
#pragma unroll
        for (uint32_t d = 0; d < D; ++d)
          acc[d] = fmaf(grid_corner_weight_dx<float, D>(c.w, c.dw, L.scale, k, d), dots[k], acc[d]);
    }
  }
#pragma unroll
  for (uint32_t d = 0; d < D; ++d) dx[b * ld_dx + d] = acc[d];
}

template <typename T, uint32_t D, uint32_t F>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
second_order_output_kernel(Launch g, int64_t batch, const T* __restrict__ params, bool vec,
                           const float* __restrict__ x, int64_t ldx, const float* __restrict__ dir,
                           int64_t ldv, Matrix out, uint32_t n_out, uint32_t padded) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * g.n_levels) return;
  int64_t b;
  uint32_t l;
  record_and_level(i, g.n_levels, b, l);
  float acc[F] = {};
  if (g.interpolation != GridInterpolation::Nearest) {
    const LevelInfo L = g.levels[l];
    const Cell<D> c = locate<D>(x, ldx, b, L.scale, g.interpolation);
    float vd[D], feat[F];
#pragma unroll
    for (uint32_t d = 0; d < D; ++d) vd[d] = dir[b * ldv + d];
    uint32_t v[D];
#pragma unroll
    for (uint32_t k = 0; k < (1u << D); ++k) {
      corner_vertex<D>(c, k, v);
      load_features<T, F>(params + size_t(entry_of<D>(g, L, v)) * F, vec, feat);
      const float w = grid_corner_directional_weight<float, D>(c.w, c.dw, L.scale, vd, k);
#pragma unroll
      for (uint32_t f = 0; f < F; ++f) acc[f] = fmaf(w, feat[f], acc[f]);
    }
  }
#pragma unroll
  for (uint32_t f = 0; f < F; ++f) out.store(b, l * F + f, acc[f]);
  if (l == 0)
    for (uint32_t j = n_out; j < padded; ++j) out.store(b, j, 0.0f);
}

template <typename T, uint32_t D, uint32_t F>
__global__ void TF_HIP_DEFAULT_BLOCK_BOUNDS
second_order_input_kernel(Launch g, int64_t batch, const T* __restrict__ params, bool vec,
                          const float* __restrict__ x, int64_t ldx, const float* __restrict__ dir,
                          int64_t ldv, Matrix dy, float* __restrict__ dx, int64_t ld_dx) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  float acc[D] = {};
  if (g.interpolation != GridInterpolation::Nearest) {
    float vd[D];
#pragma unroll
    for (uint32_t d = 0; d < D; ++d) vd[d] = dir[b * ldv + d];
    for (uint32_t l = 0; l < g.n_levels; ++l) {
      const LevelInfo L = g.levels[l];
      const SecondOrderCell<D> c = locate_second_order<D>(x, ldx, b, L.scale, g.interpolation);
      float dots[1u << D];
      corner_dots<T, D, F>(g, L, c, params, vec, dy, b, l, dots);
#pragma unroll
      for (uint32_t k = 0; k < (1u << D); ++k)
#pragma unroll
        for (uint32_t e = 0; e < D; ++e)
          acc[e] = fmaf(grid_corner_hessian_weight<float, D>(c.w, c.dw, c.d2w, L.scale, vd, k, e), dots[k], acc[e]);
    }
  }
#pragma unroll
  for (uint32_t d = 0; d < D; ++d) dx[b * ld_dx + d] = acc[d];
}

template <typename T>
void launch_input(const Job& job, const T* params, const float* x, int64_t ldx, Matrix dy, float* dx, int64_t ld_dx) {
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    input_gradient_kernel<T, D, F><<<blocks_for_threads(job.batch), kThreadsPerBlock, 0, job.stream>>>(
        job.g, job.batch, params, features_aligned<T, F>(params), x, ldx, dy, dx, ld_dx);
  });
  TF_GPU_CHECK_LAUNCH("grid input_gradient_kernel");
}

template <typename T>
void launch_second(const Job& job, const T* params, const float* x, int64_t ldx, const float* v, int64_t ldv,
                   Matrix out, uint32_t n_out, uint32_t padded) {
  const int64_t threads = job.batch * job.g.n_levels;
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    second_order_output_kernel<T, D, F><<<blocks_for_threads(threads), kThreadsPerBlock, 0, job.stream>>>(
        job.g, job.batch, params, features_aligned<T, F>(params), x, ldx, v, ldv, out, n_out, padded);
  });
  TF_GPU_CHECK_LAUNCH("grid second_order_output_kernel");
}

template <typename T>
void launch_second_input(const Job& job, const T* params, const float* x, int64_t ldx, const float* v, int64_t ldv,
                         Matrix dy, float* dx, int64_t ld_dx) {
  dispatch_dims_features(job.dims, job.features, [&](auto d, auto f) {
    constexpr uint32_t D = decltype(d)::value, F = decltype(f)::value;
    second_order_input_kernel<T, D, F><<<blocks_for_threads(job.batch), kThreadsPerBlock, 0, job.stream>>>(
        job.g, job.batch, params, features_aligned<T, F>(params), x, ldx, v, ldv, dy, dx, ld_dx);
  });
  TF_GPU_CHECK_LAUNCH("grid second_order_input_kernel");
}

}  // namespace

void input_gradients(const Job& job, Params params, const float* x, int64_t ldx, Matrix dL_doutput, float* dL_dx,
                     int64_t ld_dx) {
  if (job.batch == 0) return;
  if (params.dtype == DType::F16)
    launch_input(job, static_cast<const __half*>(params.data), x, ldx, dL_doutput, dL_dx, ld_dx);
  else
    launch_input(job, static_cast<const float*>(params.data), x, ldx, dL_doutput, dL_dx, ld_dx);
}

void second_order_output_gradients(const Job& job, Params params, const float* x, int64_t ldx, const float* v,
                                   int64_t ldv, Matrix out, uint32_t n_out, uint32_t padded) {
  if (job.batch == 0) return;
  if (params.dtype == DType::F16)
    launch_second(job, static_cast<const __half*>(params.data), x, ldx, v, ldv, out, n_out, padded);
  else
    launch_second(job, static_cast<const float*>(params.data), x, ldx, v, ldv, out, n_out, padded);
}

void second_order_input_gradients(const Job& job, Params params, const float* x, int64_t ldx, const float* v,
                                  int64_t ldv, Matrix dL_doutput, float* dL_dx, int64_t ld_dx) {
  if (job.batch == 0) return;
  if (params.dtype == DType::F16)
    launch_second_input(job, static_cast<const __half*>(params.data), x, ldx, v, ldv, dL_doutput, dL_dx, ld_dx);
  else
    launch_second_input(job, static_cast<const float*>(params.data), x, ldx, v, ldv, dL_doutput, dL_dx, ld_dx);
}

}  // namespace tinyfuse::cuda::grid
