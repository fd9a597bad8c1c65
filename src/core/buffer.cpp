#include "tinyfuse/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/half.h"
#include "core/gpu_hooks.h"
#include "core/host_memory.h"
#include "core/host_scratch.h"

namespace tinyfuse {

namespace {

constexpr size_t kHostAlignment = 64;

void* host_alloc(size_t bytes) {
  check_host_request(bytes, "a host buffer");
  void* p = std::aligned_alloc(kHostAlignment, next_multiple(bytes, kHostAlignment));
  if (!p) throw OutOfMemoryError(bytes, "a host buffer", "the allocation failed");
  return p;
}

double load_as_double(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F64: return static_cast<const double*>(base)[i];
    case DType::F16: return half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
  }
  return 0;
}

void store_from_double(void* base, DType t, int64_t i, double v) {
  switch (t) {
    case DType::F32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::F64: static_cast<double*>(base)[i] = v; break;
    case DType::F16: static_cast<uint16_t*>(base)[i] = float_to_half_bits(static_cast<float>(v)); break;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = float_to_bf16_bits(static_cast<float>(v)); break;
  }
}

// Element offset of (r, c) in a view.
int64_t offset(const TensorView& t, int64_t r, int64_t c) { return r * t.strides[0] + (t.ndim == 2 ? c * t.strides[1] : 0); }

// Host copy of a view's elements, densely packed, in its own dtype.
std::vector<char> to_host_dense(const TensorView& src) {
  std::vector<char> out(static_cast<size_t>(src.numel()) * dtype_size(src.dtype));
  if (src.device == Device::CPU) {
    const size_t es = dtype_size(src.dtype);
    for (int64_t r = 0; r < src.rows(); ++r)
      for (int64_t c = 0; c < src.cols(); ++c)
        std::memcpy(out.data() + (r * src.cols() + c) * es,
                    static_cast<const char*>(src.data) + offset(src, r, c) * static_cast<int64_t>(es), es);
  } else {
    gpu_hooks().copy_to_host_dense(src, out.data());
  }
  return out;
}

// Writes densely packed elements of dst's dtype into the host view `dst` (any strides).
void scatter_to_host(const TensorView& dst, const char* dense) {
  const size_t es = dtype_size(dst.dtype);
  for (int64_t r = 0; r < dst.rows(); ++r)
    for (int64_t c = 0; c < dst.cols(); ++c)
      std::memcpy(static_cast<char*>(dst.data) + offset(dst, r, c) * static_cast<int64_t>(es),
                  dense + (r * dst.cols() + c) * es, es);
}

// The device kernels index (row, col) as row * strides[0] + col (a vector: contiguous).
bool device_kernel_can_read(const TensorView& t) {
  return t.device == Device::CPU || (t.ndim == 2 ? t.strides[1] == 1 : t.strides[0] == 1);
}

// A copy between dtypes with a GPU side (F32, F16, BF16: exact through float) converted there in
// one kernel, the host side staged as a dense device matrix of its own dtype: element by element
// on the host it cost ~10 ns per element (f and grad_x f of a 2^18 eikonal batch: ~0.1 s a step).
void convert_through_device(const TensorView& dst, const TensorView& src) {
  const int64_t rows = dst.rows(), cols = dst.cols();
  if (dst.device != Device::CPU && src.device != Device::CPU) {
    gpu_hooks().convert(dst, src);
    return;
  }
  if (src.device == Device::CPU) {  // host -> device
    Buffer staged = Buffer::on_stream(dst.device, static_cast<size_t>(rows * cols) * dtype_size(src.dtype), dst.stream);
    const TensorView s = staged.matrix(src.dtype, rows, cols, dst.stream);
    if (src.contiguous()) {
      gpu_hooks().copy_from_host_dense(s, src.data);
    } else {
      const std::vector<char> host = to_host_dense(src);
      gpu_hooks().copy_from_host_dense(s, host.data());
    }
    gpu_hooks().convert(dst, s);  // (the staging buffer is released after it, in stream order)
    gpu_hooks().synchronize(dst.stream);  // finished on return, as every copy from the host
    return;
  }
  // device -> host
  Buffer staged = Buffer::on_stream(src.device, static_cast<size_t>(rows * cols) * dtype_size(dst.dtype), src.stream);
  const TensorView d = staged.matrix(dst.dtype, rows, cols, src.stream);
  gpu_hooks().convert(d, src);
  if (dst.contiguous()) {
    gpu_hooks().copy_to_host_dense(d, dst.data);
    return;
  }
  scatter_to_host(dst, to_host_dense(d).data());
}

}  // namespace

Buffer::Buffer(Device device, size_t bytes) : device_(device) { reserve(bytes); }
Buffer Buffer::on_stream(Device device, size_t bytes, Stream stream) {
  Buffer b;
  b.device_ = device;
  b.stream_ordered_ = true;
  b.stream_ = stream;
  b.reserve(bytes);
  return b;
}
Buffer::~Buffer() { release(); }
Buffer::Buffer(Buffer&& o) noexcept
    : device_(o.device_), data_(o.data_), bytes_(o.bytes_), stream_ordered_(o.stream_ordered_), stream_(o.stream_) {
  o.data_ = nullptr;
  o.bytes_ = 0;
}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    stream_ordered_ = o.stream_ordered_;
    stream_ = o.stream_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::release() {
  if (!data_) return;
  if (device_ == Device::CPU && stream_ordered_) host_scratch_free(data_);
  else if (device_ == Device::CPU) std::free(data_);
  else if (stream_ordered_) gpu_hooks().free_async(data_, stream_);
  else gpu_hooks().free(data_);
  data_ = nullptr;
  bytes_ = 0;
}

void Buffer::reserve(size_t bytes) {
  if (bytes <= bytes_ && data_) return;
  release();
  if (bytes == 0) return;
  if (device_ == Device::CPU) data_ = stream_ordered_ ? host_scratch_alloc(bytes, "host scratch memory") : host_alloc(bytes);
  else data_ = stream_ordered_ ? gpu_hooks().alloc_async(bytes, stream_) : gpu_hooks().alloc(bytes);
  bytes_ = bytes;
}

TensorView Buffer::matrix(DType dtype, int64_t rows, int64_t cols, Stream stream) const {
  if (checked_bytes({rows, cols, static_cast<int64_t>(dtype_size(dtype))}, "a view", false) > bytes_)
    throw Error("internal: buffer of " + std::to_string(bytes_) + " bytes too small for a view");
  return TensorView::matrix(data_, dtype, device_, rows, cols, stream);
}

TensorView Buffer::vector(DType dtype, int64_t n, Stream stream) const {
  if (checked_bytes({n, static_cast<int64_t>(dtype_size(dtype))}, "a view", false) > bytes_)
    throw Error("internal: buffer of " + std::to_string(bytes_) + " bytes too small for a view");
  return TensorView::vector(data_, dtype, device_, n, stream);
}

void copy_tensor(const TensorView& dst, const TensorView& src) {
  if (dst.rows() != src.rows() || dst.cols() != src.cols())
    throw ShapeError("copy_tensor: shapes differ: " + dst.describe() + " <- " + src.describe());
  if (dst.device != Device::CPU && src.device != Device::CPU && dst.dtype == src.dtype) {
    gpu_hooks().copy_device(dst, src);
    return;
  }
  if (dst.device != Device::CPU && src.device == Device::CPU && dst.dtype == src.dtype && dst.contiguous() &&
      src.contiguous()) {
    gpu_hooks().copy_from_host_dense(dst, src.data);
    return;
  }
  if (dst.device == Device::CPU && src.device != Device::CPU && dst.dtype == src.dtype && dst.contiguous()) {
    gpu_hooks().copy_to_host_dense(src, dst.data);
    return;
  }
  if (dst.dtype != src.dtype && (dst.device != Device::CPU || src.device != Device::CPU) && dst.dtype != DType::F64 &&
      src.dtype != DType::F64 && device_kernel_can_read(dst) && device_kernel_can_read(src)) {
    convert_through_device(dst, src);
    return;
  }
  std::vector<char> host = to_host_dense(src);
  std::vector<char> converted(static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype));
  for (int64_t i = 0; i < src.numel(); ++i)
    store_from_double(converted.data(), dst.dtype, i, load_as_double(host.data(), src.dtype, i));
  if (dst.device == Device::CPU) {
    scatter_to_host(dst, converted.data());
  } else {
    gpu_hooks().copy_from_host_dense(dst, converted.data());
  }
}

void fill_tensor(const TensorView& dst, double value) {
  if (dst.device != Device::CPU) {
    gpu_hooks().fill(dst, value);
    return;
  }
  std::vector<char> one(dtype_size(dst.dtype));
  store_from_double(one.data(), dst.dtype, 0, value);
  const size_t es = one.size();
  for (int64_t r = 0; r < dst.rows(); ++r)
    for (int64_t c = 0; c < dst.cols(); ++c)
      std::memcpy(static_cast<char*>(dst.data) + offset(dst, r, c) * static_cast<int64_t>(es), one.data(), es);
}

void synchronize(Device device, Stream stream) {
  if (device != Device::CPU) gpu_hooks().synchronize(stream);
}

double sum_tensor(const TensorView& t) {
  if (t.device != Device::CPU) return gpu_hooks().sum(t);
  double s = 0;
  // Dense FP32 (losses, a trainer's gradients every checked step): a plain loop, same order.
  if (t.dtype == DType::F32 && t.contiguous()) {
    const float* p = static_cast<const float*>(t.data);
    for (int64_t i = 0, n = t.numel(); i < n; ++i) s += p[i];
    return s;
  }
  for (int64_t r = 0; r < t.rows(); ++r)
    for (int64_t c = 0; c < t.cols(); ++c) s += load_as_double(t.data, t.dtype, offset(t, r, c));
  return s;
}

int gpu_count() { return gpu_hooks().device_count(); }

void free_temporary_memory() {
  host_scratch_trim();
  if (gpu_count() > 0) gpu_hooks().trim_pools();
}

}  // namespace tinyfuse
