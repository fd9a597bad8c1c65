// Grid and shared memory of a fused-MLP launch: weights resident in shared memory when every
// layer fits half of the device's per-block limit (so two blocks share an SM), else staged one
// layer at a time; as many blocks as the SMs hold at once, looping over the tiles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/fused/kernel_common.cuh"

namespace tinyfuse::cuda::fused {

struct DeviceLimits {
  int ordinal = 0;  // the device these are for
  int sm_count = 0;
  size_t max_smem_per_block = 0;  // opt-in maximum of dynamic shared memory
  int major = 0, minor = 0;       // compute capability
  int warp_size = 32;             // lanes per warp / wavefront (AMD: 32 or 64 by target)
};
// This thread's current device, queried once per device; or the device `device`.
const DeviceLimits& device_limits();
const DeviceLimits& device_limits(int device);

// Blocks of `threads` threads and `smem` bytes of dynamic shared memory of a persistent-grid
// kernel (the streaming kernels) that fit on one SM of the device `dev`, queried once per
// (kernel, device, threads, smem). The kernel's dynamic shared-memory limit is set to the device
// maximum on the way (never to one launch's size, so threads launching it for different networks
// cannot lower it under each other).
int resident_blocks_per_sm(const DeviceLimits& dev, const void* kernel, int threads, size_t smem);

// Blocks of a persistent-grid launch over n_tiles tiles, tiles_per_block per block and round: one
// round's worth, capped at what the SMs hold at once; 0 when not one block fits (smem over the
// device's limit, or no block resident). On the current device, or on `dev`.
int64_t persistent_grid_blocks(const void* kernel, int threads, size_t smem, int64_t n_tiles, int tiles_per_block);
int64_t persistent_grid_blocks(const DeviceLimits& dev, const void* kernel, int threads, size_t smem, int64_t n_tiles,
                               int tiles_per_block);

struct LaunchConfig {
  unsigned grid = 0;  // 0: nothing to launch (empty batch)
  size_t smem_bytes = 0;
  bool resident = false;
  int64_t n_tiles = 0;
  size_t weight_smem_bytes = 0;  // the weights' part of smem_bytes (16-byte multiple), first
};

// extra_smem_bytes: shared memory the kernel needs after the weights (the HIP kernels' per-wave
// activation buffers; 0 on CUDA, whose activations stay in registers).
template <typename Kernel>
LaunchConfig launch_config(Kernel kernel, const FusedShape& shape, size_t elem_bytes, int block_rows, int64_t batch,
                           size_t extra_smem_bytes = 0) {
  LaunchConfig cfg;
  if (batch <= 0) return cfg;
  const DeviceLimits& dev = device_limits();
  const size_t weight_limit = dev.max_smem_per_block > extra_smem_bytes ? dev.max_smem_per_block - extra_smem_bytes : 0;
  const SmemPlan plan = plan_smem(shape, elem_bytes, weight_limit / 2);
  if (plan.bytes > weight_limit)
    throw UnsupportedError("FullyFusedMLP: one layer's weights need " + std::to_string(plan.bytes) +
                           " bytes of shared memory (besides " + std::to_string(extra_smem_bytes) +
                           " for activations), this device allows " + std::to_string(dev.max_smem_per_block));
  cfg.resident = plan.resident;
  cfg.weight_smem_bytes = (plan.bytes + 15) / 16 * 16;
  cfg.smem_bytes = extra_smem_bytes ? cfg.weight_smem_bytes + extra_smem_bytes : plan.bytes;
  // Always the device maximum (never the size of this launch), so threads launching the same
  // kernel for different networks cannot lower it under each other.
  TF_GPU_CHECK(gpuFuncSetAttribute(reinterpret_cast<const void*>(kernel), gpuFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(dev.max_smem_per_block)));
  int per_sm = 0;
  TF_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarpsPerBlock * dev.warp_size, cfg.smem_bytes));
  cfg.n_tiles = (batch + block_rows - 1) / block_rows;
  const int64_t resident_blocks = static_cast<int64_t>(std::max(per_sm, 1)) * dev.sm_count;
  cfg.grid = static_cast<unsigned>(std::min<int64_t>(cfg.n_tiles, std::max<int64_t>(resident_blocks, 1)));
  return cfg;
}

}  // namespace tinyfuse::cuda::fused
