// The core's device-memory hooks on CUDA/HIP: allocation, copies, fill and sum.
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/gpu_hooks.h"
#include "tinyfuse/buffer.h"
#include "core/half.h"
#include "cuda/gpu_runtime.h"
#include "cuda/common.cuh"  // __half, HIP-aware

namespace tinyfuse {

namespace {

// A null stream means this thread's default stream, never the legacy default stream (which
// would serialise with every other stream of the device).
gpuStream_t as_stream(Stream s) { return s ? static_cast<gpuStream_t>(s) : gpuStreamPerThread; }

[[noreturn]] void out_of_memory(size_t bytes) {
  (void)gpuGetLastError();  // clear the error so the process keeps working
  throw OutOfMemoryError(bytes, "GPU memory", "the device allocation failed");
}

void* alloc(size_t bytes) {
  void* p = nullptr;
  gpuError_t e = gpuMalloc(&p, bytes);
  if (e == gpuErrorMemoryAllocation) out_of_memory(bytes);
  TF_GPU_CHECK_RESULT(e, "gpuMalloc (cudaMalloc / hipMalloc) of device memory");
  return p;
}

void release(void* p) { (void)gpuFree(p); }

// The device's default memory pool keeps freed blocks for reuse (release threshold raised once per
// device: a process may drive several GPUs, e.g. one per thread, and each has its own pool),
// which makes it the caching allocator for per-batch scratch memory.
constexpr int kPoolDevices = 64;  // devices beyond this get the (idempotent) setting on every call
std::array<std::atomic<bool>, kPoolDevices> pool_kept{};

void keep_pool_memory() {
  auto& done = pool_kept;
  int device = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  const bool tracked = device >= 0 && device < kPoolDevices;
  if (tracked && done[device].load(std::memory_order_acquire)) return;
  gpuMemPool_t pool;
  TF_GPU_CHECK(gpuDeviceGetDefaultMemPool(&pool, device));
  uint64_t threshold = UINT64_MAX;
  TF_GPU_CHECK(gpuMemPoolSetAttribute(pool, gpuMemPoolAttrReleaseThreshold, &threshold));
  if (tracked) done[device].store(true, std::memory_order_release);
}

void* alloc_async(size_t bytes, Stream s) {
  keep_pool_memory();
  void* p = nullptr;
  gpuError_t e = gpuMallocAsync(&p, bytes, as_stream(s));
  if (e == gpuErrorMemoryAllocation) out_of_memory(bytes);
  TF_GPU_CHECK_RESULT(e, "gpuMallocAsync (cudaMallocAsync / hipMallocAsync) of device memory");
  return p;
}

void release_async(void* p, Stream s) { (void)gpuFreeAsync(p, as_stream(s)); }

// Every pool keep_pool_memory() set up (and the current device's) gives its unused memory back.
void trim_pools() {
  int current = 0;
  TF_GPU_CHECK(gpuGetDevice(&current));
  for (int device = 0; device < kPoolDevices; ++device) {
    if (device != current && !pool_kept[device].load(std::memory_order_acquire)) continue;
    gpuMemPool_t pool;
    TF_GPU_CHECK(gpuDeviceGetDefaultMemPool(&pool, device));
    TF_GPU_CHECK(gpuMemPoolTrimTo(pool, 0));
  }
}

size_t row_pitch(const TensorView& t) { return static_cast<size_t>(t.strides[0]) * dtype_size(t.dtype); }
size_t row_bytes(const TensorView& t) { return static_cast<size_t>(t.cols()) * dtype_size(t.dtype); }

void require_rows_dense(const TensorView& t) {
  if (!t.rows_dense()) throw ShapeError("GPU copies need features adjacent in memory (column stride 1); got " + t.describe());
}

void copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows, Stream s) {
  if (rows == 0 || width == 0) return;
  TF_GPU_CHECK(gpuMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, gpuMemcpyDefault, as_stream(s)));
}

void copy_device(const TensorView& dst, const TensorView& src) {
  require_rows_dense(dst);
  require_rows_dense(src);
  copy_2d(dst.data, row_pitch(dst), src.data, row_pitch(src), row_bytes(src), src.rows(), dst.stream);
}

void copy_to_host_dense(const TensorView& src, void* host) {
  require_rows_dense(src);
  copy_2d(host, row_bytes(src), src.data, row_pitch(src), row_bytes(src), src.rows(), src.stream);
  TF_GPU_CHECK(gpuStreamSynchronize(as_stream(src.stream)));
}

void copy_from_host_dense(const TensorView& dst, const void* host) {
  require_rows_dense(dst);
  copy_2d(dst.data, row_pitch(dst), host, row_bytes(dst), row_bytes(dst), dst.rows(), dst.stream);
  // The host buffer may be a temporary of the caller: finish before it goes away.
  TF_GPU_CHECK(gpuStreamSynchronize(as_stream(dst.stream)));
}

template <typename Bits>
__global__ void fill_kernel(Bits* data, int64_t rows, int64_t cols, int64_t row_stride, Bits value) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  data[(i / cols) * row_stride + i % cols] = value;
}

template <typename Bits>
void launch_fill(const TensorView& t, Bits value) {
  const int64_t n = t.rows() * t.cols();
  if (n == 0) return;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  fill_kernel<<<blocks, threads, 0, as_stream(t.stream)>>>(static_cast<Bits*>(t.data), t.rows(), t.cols(),
                                                            t.ndim == 2 ? t.strides[0] : t.cols(), value);
  TF_GPU_CHECK_LAUNCH("fill_kernel");
}

void fill(const TensorView& t, double value) {
  require_rows_dense(t);
  switch (t.dtype) {
    case DType::F32: launch_fill<float>(t, static_cast<float>(value)); break;
    case DType::F64: launch_fill<double>(t, value); break;
    case DType::F16: launch_fill<uint16_t>(t, float_to_half_bits(static_cast<float>(value))); break;
    case DType::BF16: launch_fill<uint16_t>(t, float_to_bf16_bits(static_cast<float>(value))); break;
  }
}

__global__ void add_kernel(float* __restrict__ dst, int64_t ldd, const float* __restrict__ src, int64_t lds, int64_t rows,
                           int64_t cols) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  dst[(i / cols) * ldd + i % cols] += src[(i / cols) * lds + i % cols];
}

void add(const TensorView& dst, const TensorView& src) {
  require_rows_dense(dst);
  require_rows_dense(src);
  if (dst.dtype != DType::F32 || src.dtype != DType::F32 || dst.rows() != src.rows() || dst.cols() != src.cols())
    throw UnsupportedError("internal: the device add takes two F32 matrices of one shape, got " + dst.describe() + " and " +
                           src.describe());
  const int64_t n = dst.rows() * dst.cols();
  if (n == 0) return;
  const int threads = 256;
  add_kernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, as_stream(dst.stream)>>>(
      static_cast<float*>(dst.data), dst.ndim == 2 ? dst.strides[0] : dst.cols(), static_cast<const float*>(src.data),
      src.ndim == 2 ? src.strides[0] : src.cols(), dst.rows(), dst.cols());
  TF_GPU_CHECK_LAUNCH("add_kernel");
}

template <typename D, typename S>
__global__ void convert_kernel(D* __restrict__ dst, int64_t ldd, const S* __restrict__ src, int64_t lds, int64_t rows,
                               int64_t cols) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  dst[r * ldd + c] = cuda::from_float<D>(cuda::to_float(src[r * lds + c]));
}

template <typename D, typename S>
void launch_convert(const TensorView& dst, const TensorView& src) {
  const int64_t n = dst.rows() * dst.cols();
  if (n == 0) return;
  const int threads = 256;
  convert_kernel<D, S><<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, as_stream(dst.stream)>>>(
      static_cast<D*>(dst.data), dst.ndim == 2 ? dst.strides[0] : dst.cols(), static_cast<const S*>(src.data),
      src.ndim == 2 ? src.strides[0] : src.cols(), dst.rows(), dst.cols());
  TF_GPU_CHECK_LAUNCH("convert_kernel");
}

template <typename D>
void convert_from(const TensorView& dst, const TensorView& src) {
  switch (src.dtype) {
    case DType::F32: launch_convert<D, float>(dst, src); return;
    case DType::F16: launch_convert<D, __half>(dst, src); return;
    case DType::BF16: launch_convert<D, __nv_bfloat16>(dst, src); return;
    case DType::F64: break;
  }
}

// F64 is not converted here: to a 16-bit type through float it would round twice.
void convert(const TensorView& dst, const TensorView& src) {
  require_rows_dense(dst);
  require_rows_dense(src);
  if (dst.rows() != src.rows() || dst.cols() != src.cols() || dst.dtype == DType::F64 || src.dtype == DType::F64)
    throw UnsupportedError("internal: the device conversion takes two F32 / F16 / BF16 matrices of one shape, got " +
                           dst.describe() + " and " + src.describe());
  switch (dst.dtype) {
    case DType::F32: convert_from<float>(dst, src); return;
    case DType::F16: convert_from<__half>(dst, src); return;
    case DType::BF16: convert_from<__nv_bfloat16>(dst, src); return;
    case DType::F64: return;
  }
}

void synchronize_stream(Stream s) { TF_GPU_CHECK(gpuStreamSynchronize(as_stream(s))); }

// Partial sums for sum(): block b adds elements b*256+thread, stepping by the whole grid, then
// halves its 256 sums in a fixed tree; one double per block comes back. The order depends on the
// size only, so a sum is the same on every run.
constexpr int kSumBlocks = 256, kSumThreads = 256;

template <typename T>
__device__ double load_double(const T* p, int64_t i) {
  return static_cast<double>(p[i]);
}
template <>
__device__ double load_double<__half>(const __half* p, int64_t i) {
  return static_cast<double>(__half2float(p[i]));
}

template <typename T>
__global__ void partial_sums_kernel(const T* data, int64_t rows, int64_t cols, int64_t row_stride, double* partial) {
  __shared__ double sums[kSumThreads];
  double acc = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kSumThreads + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(kSumBlocks) * kSumThreads)
    acc += load_double(data, (i / cols) * row_stride + i % cols);
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sums[0];
}

template <typename T>
double device_sum(const TensorView& t) {
  double* partial = static_cast<double*>(alloc_async(kSumBlocks * sizeof(double), t.stream));
  partial_sums_kernel<T><<<kSumBlocks, kSumThreads, 0, as_stream(t.stream)>>>(
      static_cast<const T*>(t.data), t.rows(), t.cols(), t.ndim == 2 ? t.strides[0] : t.cols(), partial);
  gpuError_t launched = gpuGetLastError();
  double host[kSumBlocks];
  if (launched == gpuSuccess) launched = gpuMemcpyAsync(host, partial, sizeof(host), gpuMemcpyDefault, as_stream(t.stream));
  release_async(partial, t.stream);
  TF_GPU_CHECK_RESULT(launched, "the loss sum's kernel launch or copy to the host");
  TF_GPU_CHECK(gpuStreamSynchronize(as_stream(t.stream)));
  double s = 0;
  for (double v : host) s += v;
  return s;
}

double sum(const TensorView& t) {
  // Losses are read every training step: add on the device (in double, in a fixed order) and
  // bring back only the block sums, so reading a loss costs no transfer of the whole batch.
  if (t.numel() == 0) return 0.0;
  if (t.rows_dense()) {
    if (t.dtype == DType::F32) return device_sum<float>(t);
    if (t.dtype == DType::F64) return device_sum<double>(t);
    if (t.dtype == DType::F16) return device_sum<__half>(t);
  }
  std::vector<char> host(static_cast<size_t>(t.numel()) * dtype_size(t.dtype));
  copy_to_host_dense(t, host.data());
  TensorView h = t;
  h.data = host.data();
  h.device = Device::CPU;
  h.strides[0] = t.ndim == 2 ? t.cols() : 1;
  return sum_tensor(h);
}

// 0 rather than an error when there is no driver or device: callers use it to skip GPU work.
int device_count() {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return n;
}

uint64_t device_memory() {
  size_t free = 0, total = 0;
  if (gpuMemGetInfo(&free, &total) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return total;
}

}  // namespace

const GpuHooks& gpu_hooks() {
  static const GpuHooks hooks{alloc, release, alloc_async, release_async, copy_device, copy_to_host_dense, copy_from_host_dense, convert, fill, add, synchronize_stream, sum, device_count, trim_pools, device_memory};
  return hooks;
}

}  // namespace tinyfuse
