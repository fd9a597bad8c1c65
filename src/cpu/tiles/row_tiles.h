// The row-tile MLP engine (FP32): a tile of rows passes through every layer while its activations
// stay in the core's caches, each layer's product a tile_gemm call, and the pool's workers take
// whole tiles. mlp.cpp uses it wherever tile_gemm() has kernels; the layer-by-layer BLAS path
// remains for FP64 (the reference) and for CPUs without AVX2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cpu/tiles/tile_gemm.h"
#include "tinyfuse/activation.h"

namespace tinyfuse::cpu {

struct TiledLayer {
  uint32_t in, out;
  const float* weights;  // (out, in), row-major
  const float* bias;     // out entries, or null
  Activation act;
  size_t weight_offset, bias_offset;  // where its gradients go in the parameter-gradient vector
};

// Pre-activations z and activations y of every layer, each (batch, out) dense: what a training
// forward keeps for the backward.
struct LayerRows {
  std::vector<float*> z, y;
};

// Rows [0, batch) of x (leading dimension ldx) through the layers. Writes every layer's z and y to
// `keep` when given (a training forward), and the last layer's y to `out` (leading dimension ldo)
// when given.
void tiled_forward(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                   int64_t batch, const LayerRows* keep, float* out, int64_t ldo);

// The backward of a tiled_forward that kept its rows: from dL/doutput (dy, leading dimension
// ldy), dL/dparams into `gradients` (n_params entries, in the layers' offsets; added to them when
// `accumulate`) when it is not null, and dL/dinput into `dinput` (leading dimension ldi) when it
// is not null. Each worker sums its own rows' weight gradients; the sums are added in a fixed
// order, so results do not depend on the thread count.
void tiled_backward(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                    int64_t batch, const LayerRows& kept, const float* dy, int64_t ldy, float* gradients,
                    size_t n_params, bool accumulate, float* dinput, int64_t ldi);

// The loss of a tile: given the top layer's y of rows [r0, r0 + rows) (dense, rows x out), writes
// dL/dy for them (dense, the same shape) and whatever per-row loss values it keeps.
using TileLoss = std::function<void(int64_t r0, int64_t rows, const float* prediction, float* dL_dprediction)>;

// A whole training pass, forward, loss and backward, a tile at a time without keeping any layer's
// rows beyond the tile: dL/dparams into `gradients` (added to them when `accumulate`). The output
// and the loss gradients are not written out (what DifferentiableObject::forward_backward_with_loss
// allows); the same sums and order as tiled_forward with kept rows, then tiled_backward.
void tiled_training_pass(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                         int64_t batch, const TileLoss& loss, float* gradients, size_t n_params, bool accumulate);

}  // namespace tinyfuse::cpu
