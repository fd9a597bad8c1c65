// The fused MLP's matrix-fragment operations, by vendor:
//   CUDA: mma_cuda.cuh, inline PTX (mma.sync m16n8k16, ldmatrix), register-resident fragments
//         whose accumulator layout is the next layer's A layout;
//   HIP:  mma_hip.cuh, rocWMMA 16x16x16 fragments (WMMA on RDNA3/4 wave32, MFMA on CDNA wave64),
//         opaque layouts, so layers exchange activations through shared memory (LDS).
// Each file defines fused::kWarpSize for the target it compiles and static_asserts what it handles.
#pragma once

#if defined(TINYFUSE_WITH_HIP)
#include "cuda/fused/mma_hip.cuh"
#else
#include "cuda/fused/mma_cuda.cuh"
#endif
