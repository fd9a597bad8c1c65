// Tensor maps (the descriptions of global tiles the Hopper copy engine reads and writes) for the
// TMA inference kernel (hopper/tma_kernel.cuh), encoded on the host by the driver's
// cuTensorMapEncodeTiled, reached through the runtime so the library needs no link to libcuda.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace tinyfuse::cuda::fused {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found);
#else  // (the by-version call arrived in CUDA 12.5)
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// Whether the copy engine can describe `rows` rows of 64 16-bit values, `ld` values apart, in
// boxes of 64 rows: a row stride of a multiple of 16 bytes, no more rows than a 32-bit coordinate
// reaches, and an encoder in the driver. (The rows must also start 16-byte aligned.)
inline bool row_tiles_possible(int64_t rows, int64_t ld) {
  return ld >= 64 && (ld * 2) % 16 == 0 && rows > 0 && rows <= (int64_t{1} << 31) - 64 && tensor_map_encoder() != nullptr;
}

// `rows` rows of 64 16-bit values at `ptr`, `ld` values apart, read and written in boxes of 64
// rows, 128-byte swizzled. False when the copy engine cannot take them: ptr not 16-byte aligned,
// or not row_tiles_possible.
inline bool encode_row_tiles(CUtensorMap* map, const void* ptr, int64_t rows, int64_t ld) {
  if ((reinterpret_cast<uintptr_t>(ptr) & 15) != 0 || !row_tiles_possible(rows, ld)) return false;
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) return false;
  const cuuint64_t dims[2] = {64, static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {64, 64};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// encode_row_tiles through this thread's last few maps. A map is a function of (ptr, rows, ld)
// alone (every map here has the same element type, box and swizzle), so a remembered one is
// always right, even for memory freed and allocated again at the same address. Encoding costs
// the host 80 - 215 ns, the more when it has just waited for the GPU (tinyfuse-host-costs): a
// caller that reuses its buffers (an output buffer, a render loop's batches) saves that per map.
inline bool row_tiles(CUtensorMap* map, const void* ptr, int64_t rows, int64_t ld) {
  struct Entry {
    const void* ptr;
    int64_t rows, ld;
    CUtensorMap map;
  };
  constexpr int kEntries = 8;
  thread_local Entry recent[kEntries];
  thread_local int count = 0, next = 0;
  for (int i = 0; i < count; ++i)
    if (recent[i].ptr == ptr && recent[i].rows == rows && recent[i].ld == ld) {
      *map = recent[i].map;
      return true;
    }
  if (!encode_row_tiles(map, ptr, rows, ld)) return false;
  recent[next].ptr = ptr;
  recent[next].rows = rows;
  recent[next].ld = ld;
  recent[next].map = *map;
  next = (next + 1) % kEntries;
  count = std::min(count + 1, kEntries);
  return true;
}

}  // namespace tinyfuse::cuda::fused
