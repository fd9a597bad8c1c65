// Initial parameters of the biased MLPs (PortableMLP on every device, BlasLtMLP, BlasLtMLPFP16),
// shared so that a seed gives the same values on every backend. See docs/PARAMETERS.md.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "tinyfuse/activation.h"
#include "tinyfuse/random.h"

namespace tinyfuse {

// Uniform in +-sqrt(6 / (fan_in + fan_out)) (Glorot/Xavier, padded widths, as tiny-cuda-nn),
// biases zero. Sine networks use SIREN's scheme with its omega = 30 folded into the weights:
// first layer +-30/fan_in, later layers +-sqrt(6/fan_in). Drawn in buffer order.
// `layers` is any sequence of elements with members in, out, weight_offset and bias_offset
// (the latter read only when `biases`), in order from input to output.
template <typename Layers>
void initialize_mlp_params(const Layers& layers, bool biases, Activation activation, Pcg32& rng, float* params,
                           float scale) {
  size_t li = 0;
  for (const auto& l : layers) {
    float bound = std::sqrt(6.0f / static_cast<float>(l.in + l.out));
    if (activation == Activation::Sine)
      bound = li == 0 ? 30.0f / static_cast<float>(l.in) : std::sqrt(6.0f / static_cast<float>(l.in));
    bound *= scale;
    for (size_t i = 0; i < static_cast<size_t>(l.out) * l.in; ++i)
      params[l.weight_offset + i] = rng.next_float() * 2 * bound - bound;
    if (biases)
      for (uint32_t i = 0; i < l.out; ++i) params[l.bias_offset + i] = 0.0f;
    ++li;
  }
}

}  // namespace tinyfuse
