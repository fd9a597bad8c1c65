#include "cuda/fused/launch_config.h"

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "cuda/amd_matrix_cores.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cuda::fused {

const DeviceLimits& device_limits() {
  int device = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  return device_limits(device);
}

const DeviceLimits& device_limits(int device) {
  // This thread's last answer first: every launch asks, and the shared table's lock and lookup
  // cost more than the runtime's device query (tinyfuse-host-costs, 2026-12-04).
  thread_local int last_device = -1;
  thread_local const DeviceLimits* last = nullptr;
  if (device == last_device) return *last;
  static std::mutex mutex;
  static std::unordered_map<int, DeviceLimits> cache;  // by device ordinal; entries never move
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(device);
  if (it == cache.end()) {
    DeviceLimits d;
    d.ordinal = device;
    int smem = 0;
    TF_GPU_CHECK(gpuDeviceGetAttribute(&d.sm_count, gpuDevAttrMultiProcessorCount, device));
    TF_GPU_CHECK(gpuDeviceGetAttribute(&smem, gpuDevAttrMaxSharedMemoryPerBlockOptin, device));
    TF_GPU_CHECK(gpuDeviceGetAttribute(&d.major, gpuDevAttrComputeCapabilityMajor, device));
    TF_GPU_CHECK(gpuDeviceGetAttribute(&d.minor, gpuDevAttrComputeCapabilityMinor, device));
    // Threads per block are kWarpsPerBlock x this; the kernels' lane maths uses fused::kWarpSize,
    // the same number in their device pass (32 on NVIDIA; 32 or 64 by AMD target).
    TF_GPU_CHECK(gpuDeviceGetAttribute(&d.warp_size, gpuDevAttrWarpSize, device));
    d.max_smem_per_block = static_cast<size_t>(smem);
    it = cache.emplace(device, d).first;
  }
  last_device = device;
  last = &it->second;
  return it->second;
}

int resident_blocks_per_sm(const DeviceLimits& dev, const void* kernel, int threads, size_t smem) {
  using Key = std::tuple<const void*, int, int, size_t>;
  const Key key = std::make_tuple(kernel, dev.ordinal, threads, smem);
  // This thread's last few answers first (a network's launches ask about one or two kernels), then
  // the shared table under its lock.
  constexpr int kRecent = 4;
  thread_local Key recent_key[kRecent];
  thread_local int recent_blocks[kRecent];
  thread_local int recent_count = 0, recent_next = 0;
  for (int i = 0; i < recent_count; ++i)
    if (recent_key[i] == key) return recent_blocks[i];
  static std::mutex mutex;
  static std::map<Key, int> cache;
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      n = it->second;
    } else {
      TF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(dev.max_smem_per_block)));
      TF_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
      cache.emplace(key, n);
    }
  }
  recent_key[recent_next] = key;
  recent_blocks[recent_next] = n;
  recent_next = (recent_next + 1) % kRecent;
  recent_count = std::min(recent_count + 1, kRecent);
  return n;
}

int64_t persistent_grid_blocks(const void* kernel, int threads, size_t smem, int64_t n_tiles, int tiles_per_block) {
  return persistent_grid_blocks(device_limits(), kernel, threads, smem, n_tiles, tiles_per_block);
}

int64_t persistent_grid_blocks(const DeviceLimits& dev, const void* kernel, int threads, size_t smem, int64_t n_tiles,
                               int tiles_per_block) {
  if (smem > dev.max_smem_per_block) return 0;
  const int per_sm = resident_blocks_per_sm(dev, kernel, threads, smem);
  if (per_sm < 1) return 0;
  return std::min<int64_t>((n_tiles + tiles_per_block - 1) / tiles_per_block, static_cast<int64_t>(per_sm) * dev.sm_count);
}

void check_device_supports(DType t, const FusedShape& shape, const std::string& otype) {
  if (gpu_count() == 0) return;  // nothing can run; the first call reports that
  const DeviceLimits& dev = device_limits();
#if defined(TINYFUSE_WITH_HIP)
  const std::string arch = current_gfx_arch();
  if (!gfx_has_matrix_cores(arch))
    throw UnsupportedError(otype + " needs matrix cores with rocWMMA 16x16x16 products (" + kMatrixCoreTargets +
                           "); this device is " + arch + ". PortableMLP runs here.");
  // The HIP kernels also keep per-wave activation rows in LDS; launch_config checks the total.
#else
  const int cc = dev.major * 10 + dev.minor;
  const std::string arch = "sm_" + std::to_string(cc);
  if (t == DType::BF16 && cc < 80)
    throw ConfigError("network.precision", "\"bf16\"", otype + " in bf16 needs BF16 tensor cores (sm_80 or newer); this device is " + arch,
                      "\"f16\" (sm_75 or newer)");
  if (cc < 75)
    throw UnsupportedError(otype + " needs tensor cores with mma.sync (sm_75 or newer); this device is " + arch +
                           ". BlasLtMLPFP16 or PortableMLP run here.");
#endif
  const size_t elem = dtype_size(t);
  const SmemPlan plan = plan_smem(shape, elem, dev.max_smem_per_block / 2);
  if (plan.bytes <= dev.max_smem_per_block) return;
  // One layer does not fit: name the wider of the first and last layers.
  const size_t limit_rows = dev.max_smem_per_block / elem;
  const bool input_wider = shape.in_width >= shape.out_width;
  const int other = shape.width;
  const size_t max_w = (limit_rows / other > kSmemPad ? limit_rows / other - kSmemPad : 0) / 16 * 16;
  if (input_wider)
    throw ConfigError("network.n_input_dims", std::to_string(shape.in_width),
                      otype + " keeps a layer's weights in shared memory; the first layer's " + std::to_string(other) + " x " +
                          std::to_string(shape.in_width) + " weights exceed this device's " +
                          std::to_string(dev.max_smem_per_block) + " bytes per block",
                      "an input width of at most " + std::to_string(max_w) + ", or BlasLtMLPFP16 / PortableMLP");
  const size_t max_out = limit_rows / (other + kSmemPad) / 16 * 16;
  throw ConfigError("network.n_output_dims", std::to_string(shape.out_width),
                    otype + " keeps a layer's weights in shared memory; the output layer's " + std::to_string(shape.out_width) +
                        " x " + std::to_string(other) + " weights exceed this device's " +
                        std::to_string(dev.max_smem_per_block) + " bytes per block",
                    "a padded output width of at most " + std::to_string(max_out) + ", or BlasLtMLPFP16 / PortableMLP");
}

}  // namespace tinyfuse::cuda::fused
