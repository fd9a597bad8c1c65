// The fused MLPs' matrix-fragment operations on AMD GPUs, through rocWMMA: 16 x 16 x 16 products
// with FP16 / BF16 operands and FP32 accumulators, per wavefront. rocWMMA lowers them to WMMA on
// RDNA3 / RDNA4 (gfx11, gfx12; wave32) and to MFMA on CDNA (gfx908, gfx90a, gfx94x; wave64).
//
// What differs from the CUDA path (mma_sync.cuh): rocWMMA's fragment layouts are opaque and
// differ by target, so an accumulator cannot be reused as the next layer's A operand in
// registers. A layer's output therefore goes through shared memory (LDS): accumulators are stored
// to a per-wave FP32 scratch block (store_acc), the epilogue (rounding, activation) runs element-
// wise from there and writes the next layer's input rows into LDS, which load_a reads back.
//
// Everything here is per wavefront; a wave holds kWarpSize lanes (32 or 64 by target, compile
// time in the device pass). Lane maths outside rocWMMA (the epilogues' element loops) uses it.
//
// Needs rocWMMA (rocwmma/rocwmma.hpp): src/cuda/hip.cmake compiles the units that include this
// only when it is found. Written against rocWMMA's documented API; not compiled here (Debian 12
// packages no rocWMMA; docs/PLATFORMS.md).
#pragma once

#if !defined(TINYFUSE_WITH_HIP)
#error "rocwmma.cuh is the HIP path; CUDA builds use mma_sync.cuh (through mma.cuh)"
#endif

#include <cstdint>

#include <rocwmma/rocwmma.hpp>

#include "cuda/common.cuh"

namespace tinyfuse::cuda::fused {

// Lanes per wavefront of the target being compiled (0 in the host pass, which runs no lane maths;
// launches take the device's warp size at run time: DeviceLimits::warp_size).
constexpr int kWarpSize = gpu::kWarpSize;
static_assert(!gpu::kWarpSizeKnown || kWarpSize == 32 || kWarpSize == 64,
              "the rocWMMA path handles wave32 (RDNA) and wave64 (CDNA)");
// Upper bound for __launch_bounds__, valid in both passes.
constexpr int kMaxWarpSize = 64;

// This thread's lane and wave in the block. The divisor is 1 in the host pass (kWarpSize 0),
// which analyses kernel bodies but never runs them.
__device__ __forceinline__ int wave_lane() { return threadIdx.x % (gpu::kWarpSizeKnown ? kWarpSize : 1); }
__device__ __forceinline__ int wave_index() { return threadIdx.x / (gpu::kWarpSizeKnown ? kWarpSize : 1); }

constexpr int kFrag = 16;  // M = N = K of every fragment

// rocWMMA's element type for T (same 16-bit storage, so pointers are reinterpreted).
template <typename T>
struct WmmaElem;
template <>
struct WmmaElem<__half> {
  using type = rocwmma::float16_t;
};
template <>
struct WmmaElem<__nv_bfloat16> {
  using type = rocwmma::bfloat16_t;
};
template <typename T>
using wmma_elem_t = typename WmmaElem<T>::type;
static_assert(sizeof(rocwmma::float16_t) == 2 && sizeof(rocwmma::bfloat16_t) == 2, "16-bit storage expected");

// A: activations, 16 rows x 16 k, row-major. B: 16 k x 16 columns of W^T, read from the row-major
// (out x in) weights as a column-major matrix (B[k][n] = W[n][k] at n * ld + k).
template <typename T>
using FragA = rocwmma::fragment<rocwmma::matrix_a, kFrag, kFrag, kFrag, wmma_elem_t<T>, rocwmma::row_major>;
template <typename T>
using FragB = rocwmma::fragment<rocwmma::matrix_b, kFrag, kFrag, kFrag, wmma_elem_t<T>, rocwmma::col_major>;
using FragAcc = rocwmma::fragment<rocwmma::accumulator, kFrag, kFrag, kFrag, float>;

// The 16 x 16 block at p (row-major, row stride ld elements) as an A operand.
template <typename T>
__device__ __forceinline__ void load_a(FragA<T>& a, const T* p, int ld) {
  rocwmma::load_matrix_sync(a, reinterpret_cast<const wmma_elem_t<T>*>(p), static_cast<uint32_t>(ld));
}

// B operand for output columns n0.. and k-step k0..: w points at W[n0][k0] of the (out x in)
// row-major weights with row stride ld.
template <typename T>
__device__ __forceinline__ void load_b_from_weights(FragB<T>& b, const T* w, int ld) {
  rocwmma::load_matrix_sync(b, reinterpret_cast<const wmma_elem_t<T>*>(w), static_cast<uint32_t>(ld));
}

// B operand read as stored (B[k][n] at k * ld + n): the backward pass's weights, whose rows (the
// layer's outputs) are the product's k. p points at B[0][0] with row stride ld.
template <typename T>
using FragBRow = rocwmma::fragment<rocwmma::matrix_b, kFrag, kFrag, kFrag, wmma_elem_t<T>, rocwmma::row_major>;
template <typename T>
__device__ __forceinline__ void load_b_row_major(FragBRow<T>& b, const T* p, int ld) {
  rocwmma::load_matrix_sync(b, reinterpret_cast<const wmma_elem_t<T>*>(p), static_cast<uint32_t>(ld));
}

__device__ __forceinline__ void zero(FragAcc& c) { rocwmma::fill_fragment(c, 0.0f); }

// c += a * b.
template <typename T>
__device__ __forceinline__ void mma(FragAcc& c, const FragA<T>& a, const FragB<T>& b) {
  rocwmma::mma_sync(c, a, b, c);
}
template <typename T>
__device__ __forceinline__ void mma(FragAcc& c, const FragA<T>& a, const FragBRow<T>& b) {
  rocwmma::mma_sync(c, a, b, c);
}

// The accumulator block, row-major, into p (row stride ld floats).
__device__ __forceinline__ void store_acc(float* p, const FragAcc& c, int ld) {
  rocwmma::store_matrix_sync(p, c, static_cast<uint32_t>(ld), rocwmma::mem_row_major);
}

// Orders this wave's LDS writes before its later reads by other lanes of the same wave (a wave
// runs its LDS instructions in order; this keeps the compiler from moving them across).
__device__ __forceinline__ void wave_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

}  // namespace tinyfuse::cuda::fused
