// Building objects from tiny-cuda-nn's JSON config language.
#pragma once

#include <memory>

#include "tinyfuse/encoding.h"
#include "tinyfuse/fused_kernel_options.h"
#include "tinyfuse/loss.h"
#include "tinyfuse/network.h"
#include "tinyfuse/optimizer.h"
#include "tinyfuse/trainer.h"

namespace tinyfuse {

struct BuildOptions {
  Device device = Device::CPU;
  // Compute precision of CPU objects: F32 (default) or F64, the reference mode used by tests.
  // GPU objects take their precision from their otype.
  DType cpu_precision = DType::F32;
  FusedKernelOptions fused_kernels{};
};

std::unique_ptr<Network> create_network(const json& config, uint32_t n_input_dims,
                                        uint32_t n_output_dims, const BuildOptions& options = {});
std::unique_ptr<Encoding> create_encoding(const json& config, uint32_t n_input_dims,
                                          const BuildOptions& options = {});
std::unique_ptr<Loss> create_loss(const json& config, const BuildOptions& options = {});
std::unique_ptr<Optimizer> create_optimizer(const json& config, const BuildOptions& options = {});

// Encoding followed by network; parameters laid out network first, then encoding.
std::unique_ptr<DifferentiableObject> create_network_with_input_encoding(
    uint32_t n_input_dims, uint32_t n_output_dims, const json& encoding_config,
    const json& network_config, const BuildOptions& options = {});

// A whole tiny-cuda-nn config: {"loss", "optimizer", "encoding" (optional), "network"}.
struct Model {
  std::shared_ptr<Loss> loss;
  std::shared_ptr<Optimizer> optimizer;
  std::shared_ptr<DifferentiableObject> network;
  std::shared_ptr<Trainer> trainer;
  json config;  // the config it was built from (checkpoints store and compare it)
};
Model create_from_config(uint32_t n_input_dims, uint32_t n_output_dims, const json& config,
                         const BuildOptions& options = {}, uint64_t seed = 1337);

// The otypes this build accepts for each kind of object.
std::vector<std::string> network_otypes();
std::vector<std::string> encoding_otypes();
std::vector<std::string> loss_otypes();
std::vector<std::string> optimizer_otypes();

}  // namespace tinyfuse
