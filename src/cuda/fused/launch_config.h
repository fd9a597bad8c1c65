// What fused-MLP launches are sized by: the device's limits, and how many blocks of a kernel one
// SM holds (both remembered, per thread and per device).
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

// Blocks of `threads` threads and `smem` bytes of dynamic shared memory of a kernel that fit on one
// SM of the device `dev`, queried once per (kernel, device, threads, smem) (plans ask; launches
// don't). The kernel's dynamic shared-memory limit is set to the device maximum on the way (never
// to one launch's size, so threads launching it for different networks cannot lower it under each
// other).
int resident_blocks_per_sm(const DeviceLimits& dev, const void* kernel, int threads, size_t smem);

// Blocks of a persistent-grid launch over n_tiles tiles, tiles_per_block per block and round: one
// round's worth, capped at what the SMs of `dev` hold at once; 0 when not one block fits (smem
// over the device's limit, or no block resident).
int64_t persistent_grid_blocks(const DeviceLimits& dev, const void* kernel, int threads, size_t smem, int64_t n_tiles,
                               int tiles_per_block);

}  // namespace tinyfuse::cuda::fused
