// The portable FP32 layer kernels (portable_gemm.cuh) as launches on a stream: a layer's forward
// GEMM with bias and activation fused, its input-gradient GEMM with act' fused, its weight
// gradient summed in a fixed order, the output activation's delta. PortableMLP's passes and the
// second-order sweeps every CUDA MLP shares (mlp_second_order.h) are made of them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/staging.h"
#include "tinyfuse/activation.h"

namespace tinyfuse::cuda {

// Z = X W^T + b, Y = act(Z), out = act(Z) (Z, Y, out each optional). X: rows x in (stride ldx).
void launch_forward(Activation act, const float* x, int64_t ldx, const float* w, const float* bias, int64_t rows,
                    uint32_t in, uint32_t out_w, float* z, float* y, float* out, int64_t ldo, gpuStream_t stream);

// C = (dZ W) * act'(zprev): dZ rows x out_w (stride lddz), W out_w x in, C rows x in (stride ldc),
// zprev rows x in dense (read unless act is None).
void launch_input_grad(Activation act, const float* dz, int64_t lddz, const float* w, int64_t rows, uint32_t in,
                       uint32_t out_w, const float* zprev, float* c, int64_t ldc, gpuStream_t stream);

// How a layer's weight gradient is split over the batch.
struct GradSplit {
  int64_t chunk_rows = 0;
  int n_chunks = 1;
  int64_t count = 0;  // floats per chunk partial: out*in weights (+ out biases)
  size_t partial_floats() const { return n_chunks > 1 ? static_cast<size_t>(n_chunks) * count : 0; }
};

// A function of the shapes only (never of the device), so sums are reproducible everywhere.
GradSplit grad_split(int64_t batch, uint32_t in, uint32_t out_w, bool biases);

// grad[0 .. out*in) (+)= dZ^T X and, with biases, grad[out*in .. + out) (+)= dZ^T 1.
// dZ: rows x out_w (stride lddz); X: rows x in (stride ldx); partial: split.partial_floats() floats.
void launch_weight_grad(const GradSplit& split, const float* dz, int64_t lddz, const float* x, int64_t ldx, int64_t rows,
                        uint32_t in, uint32_t out_w, bool biases, float* grad, bool accumulate, float* partial,
                        gpuStream_t stream);

// dz = dy * act'(z), (rows x width) dense from dy (stride ldy).
void launch_output_delta(Activation act, const float* dy, int64_t ldy, const float* z, float* dz, int64_t rows,
                         uint32_t width, gpuStream_t stream);

// Offsets (in floats) of arrays carved out of one scratch buffer, each kScratchAlignment aligned.
class Carver {
 public:
  size_t take(size_t floats) {
    const size_t at = total_;
    total_ += scratch_bytes(floats * sizeof(float)) / sizeof(float);
    return at;
  }
  size_t bytes() const { return total_ * sizeof(float); }

 private:
  size_t total_ = 0;
};

// Marks an array not kept.
constexpr size_t kNone = ~size_t(0);

}  // namespace tinyfuse::cuda
