// Which AMD GPUs the HIP fused kernels (matrix-core builtins) run on, from the device's gfx name. HIP only.
#pragma once

#if defined(TINYFUSE_WITH_HIP)
#include <string>

#include "cuda/gpu_runtime.h"

namespace tinyfuse::cuda {

// The current device's gfx name without its feature suffixes ("gfx90a:sramecc+:xnack-" -> "gfx90a").
inline std::string current_gfx_arch() {
  int device = 0;
  TF_GPU_CHECK(gpuGetDevice(&device));
  gpuDeviceProp_t prop{};
  TF_GPU_CHECK(gpuGetDeviceProperties(&prop, device));
  const std::string name = prop.gcnArchName;
  return name.substr(0, name.find(':'));
}

// Targets with 16x16x16 FP16 / BF16 matrix products with FP32 accumulators: MFMA on CDNA
// (gfx908, gfx90a, gfx94x; wave64) and WMMA on RDNA3 / RDNA4 (gfx11xx, gfx12xx; wave32).
// RDNA1 / RDNA2 (gfx10xx) have no matrix instructions.
inline bool gfx_has_matrix_cores(const std::string& arch) {
  for (const char* p : {"gfx908", "gfx90a", "gfx94", "gfx95", "gfx11", "gfx12"})
    if (arch.rfind(p, 0) == 0) return true;
  return false;
}

inline constexpr const char* kMatrixCoreTargets = "gfx908, gfx90a, gfx94x (CDNA) or gfx11xx, gfx12xx (RDNA3/4)";

}  // namespace tinyfuse::cuda
#endif
