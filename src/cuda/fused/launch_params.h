// What a plan (plan.h) hands each kernel family besides the call's arguments: plain values the
// host works out once per (network, pass, batch, layout, device), so a launch only copies them.
#pragma once

#include <cstdint>

#include "cuda/fused/kernel_common.cuh"

namespace tinyfuse::cuda::fused {

namespace wgmma {

// The Hopper row-copying kernel's constants (hopper/wgmma_kernel.cuh), so that its prologue
// neither loops over layers nor divides.
struct Plan {
  int pitch;              // bytes per row of a warp's stage
  int weights_bytes;      // every layer in the swizzled layout
  int first_layer_bytes;  // layer 0's share of it
  int ld_in, ld_out;      // row strides (elements) of input and output; the host keeps 16 of them in an int
  int in_chunks, out_chunks;          // 16-byte chunks per input / output row
  int in_rows_per_step, out_rows_per_step;  // 32 / those: whole rows a warp's 32 lanes cover
  float in_per_chunk, out_per_chunk;  // 1 / the chunks: a lane's first row is lane / chunks
  int64_t n_tiles;
  int64_t full_tiles;  // tiles whose 64 rows are all inside the batch: batch / 64
};

// The Hopper TMA kernel's constants (hopper/tma_kernel.cuh).
struct TmaPlan {
  int weights_bytes;  // every layer, swizzled (a multiple of 1024)
  int64_t n_tiles;
};

}  // namespace wgmma

struct LaunchParams {
  KernelShape shape{};
  int64_t n_tiles = 0;
  int weight_bytes = 0;  // the weights' share of the shared memory (16-byte multiple): pipelined, HIP general
  int stage_stride = 0;  // pipelined: bytes per row of a warp's stage
  size_t partial_floats_per_block = 0;  // kernels forming the weight gradients: FP32 partials per block
  wgmma::Plan wgmma{};   // Wgmma
  wgmma::TmaPlan tma{};  // WgmmaTma
};

}  // namespace tinyfuse::cuda::fused
