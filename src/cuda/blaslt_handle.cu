#include "cuda/blaslt_handle.h"

#include <array>
#include <atomic>
#include <mutex>
#include <string>

namespace tinyfuse::cuda {

namespace {

constexpr int kMaxDevices = 64;

}  // namespace

gpublasLtHandle_t blaslt_handle() {
  static std::array<std::atomic<gpublasLtHandle_t>, kMaxDevices> handles{};
  static std::mutex create_mutex;
  int device = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  if (device < 0 || device >= kMaxDevices)
    throw gpu::GpuError("BLAS-Lt handle: device " + std::to_string(device) + " is beyond the " +
                        std::to_string(kMaxDevices) + " devices tinyfuse supports");
  gpublasLtHandle_t h = handles[device].load(std::memory_order_acquire);
  if (h) return h;
  std::lock_guard<std::mutex> lock(create_mutex);
  h = handles[device].load(std::memory_order_relaxed);
  if (!h) {
    TF_BLASLT_CHECK(gpublasLtCreate(&h));
    handles[device].store(h, std::memory_order_release);
  }
  return h;
}

}  // namespace tinyfuse::cuda
