// What the fused-MLP kernels compute and take (their arguments), in the network's terms; plan.h
// chooses the kernel of a call and launches it.
//
// Semantics shared by every kernel (tiny-cuda-nn's FullyFusedMLP, more accurate accumulation):
// no biases; every product accumulates in FP32 on tensor cores; a layer's pre-activation z is
// rounded to the storage type T (FP16 or BF16), y = act(z) is computed in FP32 from that rounded
// z and rounded to T; y feeds the next layer. Backward: dY of a hidden layer is the FP32 product
// rounded to T, dZ = dY * act'(z) rounded to T. Every value that would be stored in memory by a
// layer-by-layer implementation is rounded exactly there, whether or not it actually leaves the
// chip, so the result does not depend on what stays in registers.
//
// Memory rules the kernels rely on (the network class guarantees them, staging through aligned
// scratch otherwise): input / output / gradient matrices start 16-byte aligned and their row
// strides are multiples of 8 elements; every width is a multiple of 16. Parameters may have any
// element alignment.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/fused/oneblob_input.h"
#include "cuda/gpu_runtime.h"
#include "tinyfuse/activation.h"
#include "tinyfuse/common.h"

namespace tinyfuse::cuda::fused {

struct FusedShape {
  int width = 64;       // hidden width: 16, 32, 64 or 128
  int in_width = 16;    // multiple of 16
  int out_width = 16;   // padded output width, multiple of 16
  int n_hidden = 1;     // >= 1
  Activation act = Activation::ReLU, out_act = Activation::None;
};

// What forward() keeps for backward(): every hidden layer's y (the next layer's input, for its
// weight gradient); z where the derivative cannot be read from y.
constexpr bool derivative_from_y(Activation a) {
  return a == Activation::None || a == Activation::ReLU || a == Activation::LeakyReLU;
}
inline bool hidden_keeps_z(Activation a) { return !derivative_from_y(a); }
inline bool output_keeps_z(Activation a) { return a != Activation::None; }

struct ForwardArgs {
  int64_t batch = 0;
  const void* input = nullptr;
  int64_t ld_in = 0;
  const void* weights = nullptr;  // the flat parameters: each layer's (out x in) weights, back to back
  void* output = nullptr;         // (batch x out_width), or null
  int64_t ld_out = 0;
  void* hidden_y = nullptr;  // n_hidden dense (batch x width) matrices back to back, or null (inference)
  void* hidden_z = nullptr;  // the same for z, or null
  void* out_z = nullptr;     // the output layer's z, dense (batch x out_width), or null
  // A loss folded into the training forward (FusedKernel::PipelinedFoldedLoss, PipelinedTrainStep):
  // with loss.gradients set, the kernel evaluates the loss on each output row while it is on chip,
  // as the GPU Loss does with per-row values, and the output need not be written at all.
  struct Loss {
    int kind = 0;          // a LossKind: L2, RelativeL2 and L1 are folded (loss_epilogue.cuh)
    float scale = 1.0f;    // the loss scale
    float n = 1.0f;        // the element count the loss divides by (batch x dims)
    int dims = 0;          // target columns (<= out_width); the rest get gradient 0
    const float* target = nullptr;  // (batch x dims) FP32, unit column stride
    int64_t ld_target = 0;
    bool vector_target = false;     // 16-byte aligned with a row stride of a multiple of 4
    void* gradients = nullptr;      // (batch x out_width), T
    int64_t ld_grad = 0;
    float* values = nullptr;        // per row (batch), stride values_rs
    int64_t values_rs = 1;
  } loss;
  // The one-kernel training pass (PipelinedTrainStep) also writes dL/dinput (batch x in_width)
  // here when set: an encoding before the network takes its gradients from it.
  void* dL_dinput = nullptr;
  int64_t ld_din = 0;
  // Inference behind OneBlob (FusedKernel::WgmmaOneBlob): layer 0's input is OneBlob's features of
  // these positions, made in the kernel; `input` is then unused.
  OneBlobInput oneblob;
};

struct BackwardArgs {
  int64_t batch = 0;
  const void* weights = nullptr;
  const void* dL_doutput = nullptr;
  int64_t ld_dout = 0;
  const void* hidden_deriv = nullptr;  // hidden_z, or hidden_y where derivative_from_y(act)
  const void* out_z = nullptr;         // needed where output_keeps_z(out_act)
  void* dz = nullptr;  // null, or n_hidden dense (batch x width) matrices then (batch x out_width)
  void* dL_dinput = nullptr;  // (batch x in_width), or null
  int64_t ld_din = 0;
  // The network's input (batch x in_width): read only by the backward that forms the weight
  // gradients itself (FusedKernel::PipelinedWeightGrads).
  const void* input = nullptr;
  int64_t ld_in = 0;
};

// The second derivatives (backward_backward_input; FusedKernel::GeneralSecondOrder). With v =
// dL2/d(dL/dinput) and g = dL/doutput, the kernel recomputes the forward (z, y) and runs the three
// sweeps of the CPU reference (src/cpu/mlp.cpp) on chip, rounding to T wherever a layer-by-layer
// implementation would store:
//   1. the backward from g: dY_l, dZ_l = dY_l act'(z_l);
//   2. from v up: bdz_l = a_{l-1} W_l^T (a_{-1} = v), a_l = bdz_l act'(z_l),
//      bz_l = dY_l act''(z_l) bdz_l; dL2/dg = a of the output layer;
//   3. from the topmost curved layer down: dZ2_l = bz_l + (dZ2_{l+1} W_{l+1}) act'(z_l);
//      dL2/dinput = dZ2_0 W_0.
// act'(z) and act''(z) are computed in the forward from the rounded z and kept rounded to T, as is
// dY act''(z).
// Layer l's weight gradient is dz_l^T a_{l-1} + dZ2_l^T y_{l-1}: the kernel writes each layer's
// [dz_l; dZ2_l] and [a_{l-1}; y_{l-1}] stacked (rows 0 .. batch - 1, then batch .. 2 batch - 1) for
// the weight-gradient kernels below; with no curved layer there is no dZ2 and no second half.
// Matrices by layer: n_hidden (batch x width) matrices then the output layer's (batch x
// out_width), or, for the layers' inputs, (batch x in_width) then n_hidden (batch x width); the
// stacked ones have twice the rows.
struct SecondOrderArgs {
  int64_t batch = 0;
  const void* weights = nullptr;
  const void* input = nullptr;  // (batch x in_width)
  int64_t ld_in = 0;
  const void* dL_ddLdinput = nullptr;  // v (batch x in_width)
  int64_t ld_v = 0;
  const void* dL_doutput = nullptr;  // g (batch x out_width)
  int64_t ld_dout = 0;
  void* dL_ddLdoutput = nullptr;  // (batch x out_width), or null
  int64_t ld_ddout = 0;
  void* dL_dinput = nullptr;  // (batch x in_width), or null; only where some layer is curved
  int64_t ld_din = 0;
  void* dz = nullptr;  // [dz; dZ2] by layer, or null (no parameter gradients)
  void* x = nullptr;   // [a; y] of each layer's input, by layer, or null
  bool hidden_curved = false, out_curved = false;  // act'' is not 0 (not piecewise linear)
  int state_offset = 0;  // bytes: where the warps' rows start in shared memory, after the weights (set by the launch)
};

// The shared memory the second-order kernel keeps per warp beside the weights: for each layer,
// act'(z) of its rows and, where the activation is curved, act''(z) (then dY act''(z), then bz), each
// rows x (out + 8) elements of `elem_bytes` (the pad spreads a fragment's rows over the banks).
inline size_t second_order_warp_state_bytes(const FusedShape& s, int rows, size_t elem_bytes, bool hidden_curved,
                                            bool out_curved) {
  const size_t hidden = static_cast<size_t>(rows) * (s.width + 8) * (hidden_curved ? 2 : 1);
  const size_t out = static_cast<size_t>(rows) * (s.out_width + 8) * (out_curved ? 2 : 1);
  return (static_cast<size_t>(s.n_hidden) * hidden + out) * elem_bytes;
}

// Weight gradients: for each layer, grad (rows x cols, row-major, T) = [grad +] dz^T x summed
// over the batch in FP32, in an order fixed by the batch size (bitwise repeatable; no atomics).
// dz is (batch x rows), x (batch x cols). Up to kWeightGradLayersPerLaunch layers go through one
// partial-product launch and one reduction; partial must hold weight_grad_partial_floats() floats
// for the layers of one launch (at most the bytes of their dz, for cols <= 128).
struct WeightGradLayer {
  const void* dz = nullptr;
  int64_t ld_dz = 0;
  int rows = 0;
  const void* x = nullptr;
  int64_t ld_x = 0;
  int cols = 0;
  void* grad = nullptr;
};
constexpr int kWeightGradLayersPerLaunch = 8;
size_t weight_grad_partial_floats(int64_t batch, const WeightGradLayer* layers, int n);
void launch_weight_gradients(DType t, int64_t batch, const WeightGradLayer* layers, int n, float* partial,
                             bool accumulate, gpuStream_t stream);
// The reduction alone, over `chunks` partials per layer laid out as launch_weight_gradients lays
// them (layer after layer, [chunk][rows][cols]); only rows, cols and grad of the layers are read.
void launch_weight_grad_reduce(DType t, int64_t chunks, const WeightGradLayer* layers, int n, const float* partial,
                               bool accumulate, gpuStream_t stream);

// Checks at construction that this device can run the shape (sm_75+, sm_80+ for BF16; one
// layer's weights fit in shared memory); throws ConfigError / UnsupportedError naming what works.
void check_device_supports(DType t, const FusedShape& shape, const std::string& otype);

}  // namespace tinyfuse::cuda::fused
