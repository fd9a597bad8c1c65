// The fused MLPs' matrix-fragment operations on AMD GPUs, on the LLVM matrix-core builtins:
// 16 x 16 x 16 products, FP16 / BF16 operands, FP32 accumulators, per wave:
//   gfx12xx (RDNA4, wave32): __builtin_amdgcn_wmma_f32_16x16x16_{f16,bf16}_w32_gfx12;
//   gfx11xx (RDNA3, wave32): __builtin_amdgcn_wmma_f32_16x16x16_{f16,bf16}_w32;
//   gfx908 / gfx90a / gfx94x (CDNA, wave64): __builtin_amdgcn_mfma_f32_16x16x16{f16,bf16_1k}.
// Each has its own register layout (amd_fragment_layout.h, shared with the CPU test that emulates
// them). The layouts are known, so an accumulator element's (row, column) is known in the lane that
// holds it: epilogues run on the registers (for_each_element), with no LDS round trip. Targets
// without matrix instructions (RDNA1 / RDNA2, gfx10xx) compile the same kernels with a trap in
// place of the product; the host never launches them there (amd_matrix_cores.h).
//
// Everything is per wave; a wave holds kWarpSize lanes (32 or 64 by target, compile time in the
// device pass). Needs no library beyond the HIP headers (no rocWMMA).
#pragma once

#if !defined(TINYFUSE_WITH_HIP)
#error "amd_matrix_ops.cuh is the HIP path; CUDA builds use mma_sync.cuh (through mma.cuh)"
#endif

#include <cstdint>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/primitives/amd_fragment_layout.h"

namespace tinyfuse::cuda::fused {

// Lanes per wave of the target being compiled (0 in the host pass, which runs no lane maths;
// launches take the device's warp size at run time: DeviceLimits::warp_size).
constexpr int kWarpSize = gpu::kWarpSize;
static_assert(!gpu::kWarpSizeKnown || kWarpSize == 32 || kWarpSize == 64,
              "the AMD fused kernels handle wave32 (RDNA) and wave64 (CDNA)");
// Upper bound for __launch_bounds__, valid in both passes.
constexpr int kMaxWarpSize = 64;

// The instruction family of the target being compiled. The host pass and targets without matrix
// instructions type-check with the gfx12 layout (never run: mma traps there).
#if defined(__GFX12__)
#define TF_AMD_MATRIX_ISA amd::MatrixIsa::Gfx12Wmma
#elif defined(__GFX11__)
#define TF_AMD_MATRIX_ISA amd::MatrixIsa::Gfx11Wmma
#elif defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
    defined(__gfx942__) || defined(__gfx950__)
#define TF_AMD_MATRIX_ISA amd::MatrixIsa::CdnaMfma
#endif
#if defined(TF_AMD_MATRIX_ISA)
constexpr bool kHasMatrixCores = true;
using Layout = amd::FragmentLayout<TF_AMD_MATRIX_ISA>;
static_assert(Layout::kWave == kWarpSize, "the matrix instructions' wave size is the target's");
#else
constexpr bool kHasMatrixCores = false;
using Layout = amd::FragmentLayout<amd::MatrixIsa::Gfx12Wmma>;
#endif

// This thread's lane and wave in the block. The divisor is 1 in the host pass (kWarpSize 0),
// which analyses kernel bodies but never runs them.
__device__ __forceinline__ int wave_lane() { return threadIdx.x % (gpu::kWarpSizeKnown ? kWarpSize : 1); }
__device__ __forceinline__ int wave_index() { return threadIdx.x / (gpu::kWarpSizeKnown ? kWarpSize : 1); }

constexpr int kFrag = amd::kFrag;  // M = N = K of every fragment

using OperandBits = short __attribute__((ext_vector_type(Layout::kOperandElems)));
using AccVec = float __attribute__((ext_vector_type(Layout::kAccElems)));

// An A or B operand of element type T (FP16 or BF16): this lane's values as raw 16-bit patterns.
template <typename T>
struct Operand {
  OperandBits v;
};
// A: activations, 16 rows x 16 k, row-major. B: 16 k x 16 columns of W^T, read from the row-major
// (out x in) weights as a column-major matrix (B[k][n] = W[n][k] at n * ld + k), or as stored
// (FragBRow, B[k][n] at k * ld + n). Same registers; only the loads differ.
template <typename T>
using FragA = Operand<T>;
template <typename T>
using FragB = Operand<T>;
template <typename T>
using FragBRow = Operand<T>;
struct FragAcc {
  AccVec v;
};

// A lane's run of kOperandElems consecutive 16-bit values at p, in 16-byte (or smaller) vector
// loads. p is aligned to the run's size up to 16 bytes: the blocks start 16-byte aligned, row
// strides are multiples of 8 elements, and runs start at multiples of their length.
template <int n = Layout::kOperandElems>
__device__ __forceinline__ OperandBits load_run(const uint16_t* p) {
  if constexpr (n <= 8) {
    return *reinterpret_cast<const OperandBits*>(p);
  } else {
    using Half = short __attribute__((ext_vector_type(n / 2)));
    const Half lo = *reinterpret_cast<const Half*>(p), hi = *reinterpret_cast<const Half*>(p + n / 2);
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
}

// The 16 x 16 block at p (row-major, row stride ld elements) as an A operand.
template <typename T>
__device__ __forceinline__ void load_a(FragA<T>& a, const T* p, int ld) {
  a.v = load_run(reinterpret_cast<const uint16_t*>(p) + amd::operand_run_offset<Layout>(wave_lane(), ld));
}

// B operand for output columns n0.. and k-step k0..: w points at W[n0][k0] of the (out x in)
// row-major weights with row stride ld.
template <typename T>
__device__ __forceinline__ void load_b_from_weights(FragB<T>& b, const T* w, int ld) {
  b.v = load_run(reinterpret_cast<const uint16_t*>(w) + amd::operand_run_offset<Layout>(wave_lane(), ld));
}

// B operand read as stored (B[k][n] at k * ld + n): the backward pass's weights, whose rows (the
// layer's outputs) are the product's k. p points at B[0][0] with row stride ld. Strided: one
// 16-bit load per value.
template <typename T>
__device__ __forceinline__ void load_b_row_major(FragBRow<T>& b, const T* p, int ld) {
  short vals[Layout::kOperandElems];
  amd::gather_b_row_major<Layout>(vals, reinterpret_cast<const short*>(p), ld, wave_lane());
#pragma unroll
  for (int i = 0; i < Layout::kOperandElems; ++i) b.v[i] = vals[i];
}

__device__ __forceinline__ void zero(FragAcc& c) { c.v = AccVec{}; }

// c += a * b.
template <typename T>
__device__ __forceinline__ void mma(FragAcc& c, const Operand<T>& a, const Operand<T>& b) {
  constexpr bool f16 = std::is_same_v<T, __half>;
  static_assert(f16 || std::is_same_v<T, __nv_bfloat16>, "FP16 or BF16 operands");
#if defined(__GFX12__)
  using H = _Float16 __attribute__((ext_vector_type(8)));
  if constexpr (f16)
    c.v = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(__builtin_bit_cast(H, a.v), __builtin_bit_cast(H, b.v), c.v);
  else
    c.v = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(a.v, b.v, c.v);
#elif defined(__GFX11__)
  using H = _Float16 __attribute__((ext_vector_type(16)));
  if constexpr (f16)
    c.v = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(H, a.v), __builtin_bit_cast(H, b.v), c.v);
  else
    c.v = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(a.v, b.v, c.v);
#elif defined(TF_AMD_MATRIX_ISA)  // CDNA
  using H = _Float16 __attribute__((ext_vector_type(4)));
  if constexpr (f16)
    c.v = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(H, a.v), __builtin_bit_cast(H, b.v), c.v, 0, 0, 0);
  else
#if defined(__gfx908__)
    __builtin_trap();  // gfx908 has no 16x16x16 BF16 MFMA (only the 16x16x8 form, another layout)
#else
    c.v = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a.v, b.v, c.v, 0, 0, 0);
#endif
#elif defined(__HIP_DEVICE_COMPILE__)
  (void)c, (void)a, (void)b;
  __builtin_trap();  // no matrix instructions on this target; the host refuses it
#else
  (void)c, (void)a, (void)b;  // host pass: never runs
#endif
}

// f(r, c, v) for every element v = block[r][c] of an accumulator block, each element once, by the
// lane that holds it (no data moves between lanes).
template <typename F>
__device__ __forceinline__ void for_each_element(const FragAcc& acc, int lane, F&& f) {
#pragma unroll
  for (int i = 0; i < Layout::kAccElems; ++i) f(Layout::acc_row(lane, i), Layout::acc_col(lane, i), acc.v[i]);
}
template <typename F>
__device__ __forceinline__ void for_each_element(const FragAcc& acc, F&& f) {
  for_each_element(acc, wave_lane(), f);
}

// This lane's index as a value the compiler cannot trace to threadIdx: taken once per iteration of
// a kernel's loop over tiles and passed to for_each_element, it keeps the compiler from hoisting
// every element's row and column offsets (and the addresses built from them) out of that loop. At
// 16 and 32 wide (64 rows a wave) those loop-invariant values alone outgrew the 256 VGPRs and
// spilled.
__device__ __forceinline__ int lane_this_iteration() {
  int lane = wave_lane();
#if defined(__HIP_DEVICE_COMPILE__)
  asm volatile("" : "+v"(lane));
#endif
  return lane;
}

// Orders this wave's LDS writes before its later reads by other lanes of the same wave (a wave
// runs its LDS instructions in order; this keeps the compiler from moving them across).
__device__ __forceinline__ void wave_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

}  // namespace tinyfuse::cuda::fused
