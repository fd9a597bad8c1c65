// The passes of a FullyFusedMLP and the kernels that may run them (plan.h decides which), in
// plain C++ for the network's callers and the tests that ask which kernel ran.
#pragma once

#include <cstdint>

namespace tinyfuse::cuda::fused {

enum class FusedPass : uint8_t {
  Inference,            // input -> output, nothing kept
  TrainingForward,      // also keeps what backward needs
  ForwardWithLoss,      // the training forward with the built-in loss evaluated on chip
  Backward,             // dZ of every layer and / or dL/dinput
  BackwardWeightGrads,  // parameter gradients (no dL/dinput) with the weight gradients formed inside
  TrainStep,            // forward, loss, backward and weight gradients in one kernel
  SecondOrder,          // backward_backward_input: the second derivatives
  EncodedInference,     // inference from an encoding's input, its features made inside (OneBlob's positions)
};
constexpr int kFusedPasses = 8;

enum class FusedKernel : uint8_t {
  None,                  // no kernel takes the pass as one: the network runs it as several
  General,               // general/: fused_forward_kernel or fused_backward_kernel
  Pipelined,             // pipelined/: the forward (inference or training) or the backward
  PipelinedFoldedLoss,   // pipelined/: the training forward with the L2, RelativeL2 or L1 loss folded in
  PipelinedWeightGrads,  // pipelined/: the backward forming the weight gradients
  PipelinedTrainStep,    // pipelined/: the whole training pass
  Wgmma,                 // hopper/: warpgroup inference, rows copied by the warps
  WgmmaTma,              // hopper/: warpgroup inference, whole tiles moved by TMA
  GeneralSecondOrder,    // general/: fused_second_order_kernel, then the weight-gradient kernels
  WgmmaOneBlob,          // hopper/: warpgroup inference making OneBlob's features from positions
};
const char* to_string(FusedKernel kernel);
const char* to_string(FusedPass pass);

// Whether this build holds the Hopper kernels (its CUDA architectures include 90).
bool hopper_kernels_built();

}  // namespace tinyfuse::cuda::fused
