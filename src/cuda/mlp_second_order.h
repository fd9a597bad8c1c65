// Second derivatives of the CUDA MLPs (backward_backward_input) in FP32 on the portable layer
// kernels: the CPU reference's three sweeps (src/cpu/mlp.cpp). PortableMLP runs them on the state
// its forward() kept. FullyFusedMLP, BlasLtMLP and BlasLtMLPFP16 keep FP16 or fused
// state, so they recompute an FP32 forward from their parameters (widened where FP16) and run the
// same sweeps: their second derivatives are the FP32 network's with their parameters, which their
// own FP16 kernels match to FP16 rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/mlp_base.h"
#include "cuda/common.cuh"
#include "tinyfuse/network.h"

namespace tinyfuse::cuda {

// An MLP's layers as the sweeps see them.
struct SecondOrderShape {
  const std::vector<MlpBase::Layer>& layers;
  bool biases;
  Activation hidden, output;
  Activation activation(size_t li) const { return li + 1 == layers.size() ? output : hidden; }
};

// What the forward pass computed, per layer, dense (batch x layer width): z where the layer's
// activation is not None (null there), y for the hidden layers.
struct ForwardState {
  std::vector<const float*> z, y;
};

// One call's operands, FP32, leading dimensions in elements.
struct SecondOrderIo {
  int64_t batch = 0;
  const float* x = nullptr;  // the input
  int64_t ldx = 0;
  const float* v = nullptr;  // dL2/d(dL/dinput)
  int64_t ldv = 0;
  const float* g = nullptr;  // dL/doutput, as backward() saw it
  int64_t ldg = 0;
  float* ddy = nullptr;  // dL2/d(dL/doutput), written when not null
  int64_t ldddy = 0;
  float* d2x = nullptr;  // dL2/dinput, written when not null
  int64_t ldd2x = 0;
};

// Adds dL2/dparams to `grad` (FP32 in the network's parameter layout; null when not wanted) and
// writes io's outputs; work and scratch on `stream`. Sums run in a fixed order.
void second_order_sweeps(const SecondOrderShape& net, const float* weights, const ForwardState& state,
                         const SecondOrderIo& io, float* grad, Stream stream);

// The whole call for a network that keeps no FP32 state, from its parameters `weights` (T is
// float or __half) and the caller's views (dtype T, checked by the caller); parameter gradients
// are written or added per `mode` (Overwrite clears them first, also for an empty batch).
template <typename T>
void recomputed_second_order(const SecondOrderShape& net, size_t n_params, const T* weights, T* gradients,
                             const TensorView& input, const TensorView& dL_ddLdinput, const TensorView& dL_doutput,
                             const TensorView* dL_ddLdoutput, const TensorView* dL_dinput, GradientMode mode);

}  // namespace tinyfuse::cuda
