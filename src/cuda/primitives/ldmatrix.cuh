// ldmatrix / stmatrix: 8x8 blocks of 16-bit values between shared memory and the mma.sync
// fragment layouts (primitives/mma_sync.cuh), each wrapped once. Shared-memory operands are
// 32-bit shared-window addresses (shared_address converts a generic pointer). ldmatrix sm_75+,
// stmatrix sm_90+. CUDA only.
#pragma once

#if defined(TINYFUSE_WITH_HIP)
#error "ldmatrix.cuh is NVIDIA PTX; HIP builds use primitives/amd_matrix_ops.cuh"
#endif

#include <cstdint>

namespace tinyfuse::cuda::ptx {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices from shared memory; lanes 8q..8q+7 give the row addresses of matrix q.
// Lane l receives, in r[q], elements (l / 4, 2 (l % 4) .. +1) of matrix q.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// The same with every matrix transposed: lane l receives, in r[q], elements (2 (l % 4) .. +1,
// l / 4) of matrix q (the B operand of a product with a row-major matrix read transposed).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // (declared in the host pass for sm_90-only callers)
// The inverse of ldmatrix_x4: r[q] goes back to where ldmatrix_x4 would have read it.
__device__ __forceinline__ void stmatrix_x4(uint32_t address, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :
               : "r"(address), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
#endif

}  // namespace tinyfuse::cuda::ptx
