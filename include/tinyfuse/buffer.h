// Owning device or host memory, and the few device-neutral memory operations the core needs.
#pragma once

#include <cstddef>

#include "tinyfuse/tensor.h"

namespace tinyfuse {

class Buffer {
 public:
  Buffer() = default;
  // Long-lived memory (parameters, optimizer state): usable from any stream.
  Buffer(Device device, size_t bytes);
  // Scratch memory for work queued on `stream` (forward contexts, temporaries): allocated and
  // freed in stream order from the GPU's caching pool, so it costs no synchronisation; on the
  // CPU from a cache of host blocks kept for reuse (core/host_scratch.h), so that a step's
  // scratch is not faulted in afresh every step. The stream must outlive the buffer (and so every
  // Context that a forward() on that stream returned): the buffer is freed on it.
  static Buffer on_stream(Device device, size_t bytes, Stream stream);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // Grows (never shrinks) to at least `bytes`; contents are not kept.
  void reserve(size_t bytes);

  TensorView matrix(DType dtype, int64_t rows, int64_t cols, Stream stream = nullptr) const;
  TensorView vector(DType dtype, int64_t n, Stream stream = nullptr) const;

 private:
  void release();
  Device device_ = Device::CPU;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool stream_ordered_ = false;
  Stream stream_ = nullptr;
};

// Copies `src` into `dst` (same shape; dtype conversion between F32, F64 and the 16-bit types
// is done on the host). Either may be on any device; work goes on dst.stream.
void copy_tensor(const TensorView& dst, const TensorView& src);
// Fills every element of `dst` with `value` (converted to its dtype).
void fill_tensor(const TensorView& dst, double value);
// Waits until queued work on `stream` of `device` is done (no-op on the CPU).
void synchronize(Device device, Stream stream);
// Sum of all elements, in double, returned on the host (synchronizes the stream).
double sum_tensor(const TensorView& t);

// Number of GPUs this build can use here (0 without a GPU backend, driver or device).
int gpu_count();

// Gives the GPU memory that tinyfuse's stream-ordered pools keep for reuse (the scratch of earlier
// calls) back to the driver, as tiny-cuda-nn's free_temporary_memory does with its arenas; memory
// in use stays. The host scratch kept for reuse (Buffer::on_stream on the CPU) is freed too.
void free_temporary_memory();

}  // namespace tinyfuse
