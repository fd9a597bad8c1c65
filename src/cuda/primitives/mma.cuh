// The fused MLPs' matrix-fragment operations, by vendor, as the fused kernels name them
// (namespace fused):
//   CUDA: mma_sync.cuh and ldmatrix.cuh, inline PTX (mma.sync m16n8k16, ldmatrix),
//         register-resident fragments whose accumulator layout is the next layer's A layout;
//   HIP:  amd_matrix_ops.cuh, the LLVM matrix-core builtins, 16x16x16 fragments (WMMA on RDNA3/4
//         wave32, MFMA on CDNA wave64) in layouts known per target (amd_fragment_layout.h); the
//         kernels exchange activations between layers through shared memory (LDS).
// Each defines fused::kWarpSize for the target it compiles and states what it handles.
#pragma once

#if defined(TINYFUSE_WITH_HIP)
#include "cuda/primitives/amd_matrix_ops.cuh"
#else
#include "cuda/primitives/ldmatrix.cuh"
#include "cuda/primitives/mma_sync.cuh"

namespace tinyfuse::cuda::fused {
using ptx::kWarpSize;
using ptx::lane_group;
using ptx::lane_in_group;
using ptx::mma_16816;
using ptx::pack2;
using ptx::unpack2;
}  // namespace tinyfuse::cuda::fused
#endif
