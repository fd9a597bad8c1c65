// The few memory operations the device-neutral core needs from a GPU backend. A build without
// one gets hooks that throw UnsupportedError explaining how to enable it.
#pragma once

#include "tinyfuse/tensor.h"

namespace tinyfuse {

struct GpuHooks {
  void* (*alloc)(size_t bytes);
  void (*free)(void* p);
  // Stream-ordered allocation from a caching pool (cudaMallocAsync / cudaFreeAsync).
  void* (*alloc_async)(size_t bytes, Stream stream);
  void (*free_async)(void* p, Stream stream);
  void (*copy_device)(const TensorView& dst, const TensorView& src);
  void (*copy_to_host_dense)(const TensorView& src, void* host);
  void (*copy_from_host_dense)(const TensorView& dst, const void* host);
  // dst = src converted, both on the device, rows dense, F32 / F16 / BF16 (exact through float);
  // queued on dst.stream.
  void (*convert)(const TensorView& dst, const TensorView& src);
  void (*fill)(const TensorView& dst, double value);
  // dst += src elementwise: same shape, F32, rows dense, on the device; queued on dst.stream.
  void (*add)(const TensorView& dst, const TensorView& src);
  void (*synchronize)(Stream stream);
  double (*sum)(const TensorView& t);
  int (*device_count)();
  // Hands the memory the caching pools keep for reuse back to the driver (memory in use stays).
  void (*trim_pools)();
  // Total memory of the current device in bytes; 0 when it cannot be read (no driver or device).
  uint64_t (*device_memory)();
};

const GpuHooks& gpu_hooks();

}  // namespace tinyfuse
