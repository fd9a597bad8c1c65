// Reading a network config into a device-neutral description (MlpSpec), with every rule of
// each otype checked here once, so all backends agree on what is accepted.
#pragma once

#include <string>

#include "tinyfuse/activation.h"
#include "tinyfuse/common.h"
#include "tinyfuse/fused_kernel_options.h"
#include "tinyfuse/object.h"

namespace tinyfuse {

// The largest width a network takes in or gives out, and the most input dimensions an encoding
// takes. Widths are 32-bit; an encoding's output is up to 1024 per input dimension (OneBlob's
// bins), so 2^20 keeps every width and its padding exact. Far above any tiny MLP.
constexpr uint32_t kMaxModelWidth = uint32_t{1} << 20;

// Shape and semantics of an MLP, resolved from its config.
struct MlpSpec {
  std::string otype;
  uint32_t input_width = 0;
  uint32_t n_neurons = 128;
  uint32_t n_hidden_layers = 5;
  uint32_t output_width = 0;
  uint32_t padded_output_width = 0;  // output_width, or rounded up to 16 with tiny-cuda-nn semantics
  uint32_t input_alignment = 1;
  Activation activation = Activation::ReLU;
  Activation output_activation = Activation::None;
  bool biases = true;
  // FullyFusedMLP's "precision": the 16-bit type its GPU kernels store parameters and
  // activations in (f16 or bf16; accumulation is FP32 either way). The CPU reference computes
  // every value in its own precision (BuildOptions::cpu_precision) whatever this says.
  DType precision = DType::F16;
  // FullyFusedMLP on CUDA: the kernels its planner may choose (BuildOptions::fused_kernels).
  FusedKernelOptions fused_kernels{};
};

// Parses and checks `config` ("network" section) for the given device; throws ConfigError.
MlpSpec parse_network_config(const json& config, uint32_t n_input_dims, uint32_t n_output_dims, Device device,
                             const std::string& path = "network");

}  // namespace tinyfuse
