// GPU hooks of a build without a GPU backend: every call explains how to get one.
#include "core/gpu_hooks.h"

#include "tinyfuse/errors.h"

namespace tinyfuse {

namespace {
[[noreturn]] void no_gpu() {
  throw UnsupportedError(
      "this tinyfuse was built without a GPU backend (rule: Device::CUDA needs a CUDA build); "
      "configure with -DTINYFUSE_CUDA=ON, or use Device::CPU");
}
void* alloc(size_t) { no_gpu(); }
void release(void*) {}
void* alloc_async(size_t, Stream) { no_gpu(); }
void release_async(void*, Stream) {}
void copy_device(const TensorView&, const TensorView&) { no_gpu(); }
void to_host(const TensorView&, void*) { no_gpu(); }
void from_host(const TensorView&, const void*) { no_gpu(); }
void convert(const TensorView&, const TensorView&) { no_gpu(); }
void fill(const TensorView&, double) { no_gpu(); }
void add(const TensorView&, const TensorView&) { no_gpu(); }
void sync(Stream) { no_gpu(); }
double sum(const TensorView&) { no_gpu(); }
int device_count() { return 0; }
void trim_pools() {}  // no pools
uint64_t device_memory() { return 0; }
}  // namespace

const GpuHooks& gpu_hooks() {
  static const GpuHooks hooks{alloc, release, alloc_async, release_async, copy_device, to_host, from_host, convert, fill, add, sync, sum, device_count, trim_pools, device_memory};
  return hooks;
}

}  // namespace tinyfuse
