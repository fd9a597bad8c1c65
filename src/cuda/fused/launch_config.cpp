#include "cuda/fused/launch_config.h"

#include "cuda/fused/plan.h"

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "cuda/primitives/amd_matrix_cores.h"
#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cuda::fused {

const DeviceLimits& device_limits() {
  int device = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  return device_limits(device);
}

const DeviceLimits& device_limits(int device) {
  // This thread's last answer first: every call asks, and the shared table's lock and lookup
  // cost more than the runtime's device query (tinyfuse-host-costs).
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
  static std::mutex mutex;
  static std::map<Key, int> cache;
  const Key key = std::make_tuple(kernel, dev.ordinal, threads, smem);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int n = 0;
  TF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dev.max_smem_per_block)));
  TF_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  cache.emplace(key, n);
  return n;
}

int64_t persistent_grid_blocks(const DeviceLimits& dev, const void* kernel, int threads, size_t smem, int64_t n_tiles,
                               int tiles_per_block) {
  if (smem > dev.max_smem_per_block) return 0;
  const int per_sm = resident_blocks_per_sm(dev, kernel, threads, smem);
  if (per_sm < 1) return 0;
  return std::min<int64_t>((n_tiles + tiles_per_block - 1) / tiles_per_block, static_cast<int64_t>(per_sm) * dev.sm_count);
}

FusedPlan plan_general(const GeneralKernel& kernel, const PlanInputs& in) {
  FusedPlan p;
  p.kernel = FusedKernel::General;
  p.function = kernel.function;
  if (in.batch <= 0) return p;  // nothing to launch
  const DeviceLimits& dev = *in.device;
  const size_t extra = kernel.extra_smem_bytes;
  const size_t weight_limit = dev.max_smem_per_block > extra ? dev.max_smem_per_block - extra : 0;
  const SmemPlan plan = plan_smem(in.shape, dtype_size(in.dtype), weight_limit / 2);
  if (plan.bytes > weight_limit)
    throw UnsupportedError("FullyFusedMLP: one layer's weights need " + std::to_string(plan.bytes) +
                           " bytes of shared memory (besides " + std::to_string(extra) +
                           " for activations), this device allows " + std::to_string(dev.max_smem_per_block));
  const size_t weight_smem_bytes = (plan.bytes + 15) / 16 * 16;
  p.smem = extra ? weight_smem_bytes + extra : plan.bytes;
  p.threads = static_cast<unsigned>(kWarpsPerBlock * dev.warp_size);  // the wave size is the device's on AMD
  const int per_sm = resident_blocks_per_sm(dev, kernel.function, static_cast<int>(p.threads), p.smem);
  p.params.shape = kernel_shape(in.shape, plan.resident);
  p.params.n_tiles = (in.batch + kernel.block_rows - 1) / kernel.block_rows;
  p.params.weight_bytes = static_cast<int>(weight_smem_bytes);
  const int64_t resident_blocks = static_cast<int64_t>(std::max(per_sm, 1)) * dev.sm_count;
  p.blocks = static_cast<unsigned>(std::min<int64_t>(p.params.n_tiles, std::max<int64_t>(resident_blocks, 1)));
  return p;
}

void check_device_supports(DType t, const FusedShape& shape, const std::string& otype) {
  if (gpu_count() == 0) return;  // nothing can run; the first call reports that
  const DeviceLimits& dev = device_limits();
#if defined(TINYFUSE_WITH_HIP)
  const std::string arch = current_gfx_arch();
  if (!gfx_has_matrix_cores(arch))
    throw UnsupportedError(otype + " needs matrix cores with 16x16x16 WMMA / MFMA products (" + kMatrixCoreTargets +
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
