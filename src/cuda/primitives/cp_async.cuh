// Asynchronous and explicit copies the pipelined kernels are built from (sm_80+): cp.async global
// -> shared with zero fill, 16- and 4-byte shared loads and stores, and 16-byte global loads and
// stores marked streaming (evict first). Shared-memory operands are 32-bit shared-window
// addresses (primitives/ldmatrix.cuh: shared_address). CUDA only.
#pragma once

#if defined(TINYFUSE_WITH_HIP)
#error "cp_async.cuh is NVIDIA PTX"
#endif

#include <cstdint>

namespace tinyfuse::cuda::ptx {

// 16 bytes global -> shared, asynchronous, through L2 only. Reads `src_bytes` (16 or 0) bytes
// and zero-fills the rest, so a row past the batch reads nothing and becomes zeros.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

__device__ __forceinline__ uint4 ld_shared_16(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address)
               : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_16(uint32_t address, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void st_shared_4(uint32_t address, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_2(uint32_t address, unsigned short v) {
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(address), "h"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_4(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(address) : "memory");
  return v;
}
// 16-byte global load marked streaming (evict first): read once, as a loss target is.
__device__ __forceinline__ uint4 ld_global_streaming_16(const void* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
// 16-byte global store marked streaming (evict first): outputs are not read again by this kernel.
__device__ __forceinline__ void st_global_streaming_16(void* p, uint4 v) {
  asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

}  // namespace tinyfuse::cuda::ptx
