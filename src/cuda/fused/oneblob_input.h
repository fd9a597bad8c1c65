// A OneBlob encoding as the Hopper inference kernel reads it when it makes the features itself
// (FusedKernel::WgmmaOneBlob, hopper/oneblob_stage.cuh): the positions and the bin count, instead
// of a feature matrix OneBlob's own kernel wrote. Plain C++.
#pragma once

#include <cstdint>

namespace tinyfuse::cuda::fused {

// Inputs per row the kernel takes: a warp's 16 rows are then at most 64 positions, two a lane.
constexpr uint32_t kOneBlobMaxDims = 4;

struct OneBlobInput {
  const float* x = nullptr;  // (batch x dims) FP32 positions, adjacent in a row; null: no OneBlob
  int64_t ldx = 0;           // row stride (elements)
  uint32_t dims = 0;         // 1 .. kOneBlobMaxDims
  uint32_t n_bins = 0;       // features per position: a multiple of 8, at least 8
  float inv_bins = 0.0f;     // oneblob_inv_bins(n_bins) (core/encodings/oneblob_math.h)
};

}  // namespace tinyfuse::cuda::fused
