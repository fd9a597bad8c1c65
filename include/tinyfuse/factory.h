// Building objects from tiny-cuda-nn's JSON config language.
#pragma once

#include <memory>
#include <vector>

#include "tinyfuse/encoding.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/fused_kernel_options.h"
#include "tinyfuse/limits.h"
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
  // Keys that no object reads. By default each is a ConfigError (with a "did you mean" for near
  // misses). With a vector here they are skipped instead and reported in it, one ConfigError per
  // key path as it would have been thrown; every other rule stays an error. For callers whose
  // configs carry keys of their own, as tiny-cuda-nn's users' do (tinyfuse.tcnn warns with them).
  std::vector<ConfigError>* ignored_keys = nullptr;
  FusedKernelOptions fused_kernels{};
};

std::unique_ptr<Network> create_network(const json& config, uint32_t n_input_dims,
                                        uint32_t n_output_dims, const BuildOptions& options = {});
std::unique_ptr<Encoding> create_encoding(const json& config, uint32_t n_input_dims,
                                          const BuildOptions& options = {});
std::unique_ptr<Loss> create_loss(const json& config, const BuildOptions& options = {});
std::unique_ptr<Optimizer> create_optimizer(const json& config, const BuildOptions& options = {});

// Encoding followed by network; parameters laid out network first, then encoding. The encoding's
// output is padded to the network's input alignment (16 for FullyFusedMLP and CutlassMLP).
std::unique_ptr<DifferentiableObject> create_network_with_input_encoding(
    uint32_t n_input_dims, uint32_t n_output_dims, const json& encoding_config,
    const json& network_config, const BuildOptions& options = {});

// A network that takes any input width, as tiny-cuda-nn's cpp_api::create_network (its Python
// `Network`) builds it: the network behind an Identity encoding that pads the input with ones to
// the network's input alignment, so the parameters are those of the padded network. An input
// width that is already aligned gets the network alone (the Identity would only copy).
std::unique_ptr<DifferentiableObject> create_padded_network(uint32_t n_input_dims, uint32_t n_output_dims,
                                                            const json& network_config,
                                                            const BuildOptions& options = {});

// The input alignment of a network config's otype on `device` (1, 16, or Width64FusedMLP's 64).
uint32_t network_input_alignment(const json& network_config, Device device);

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

// Config text and config files, read as every tinyfuse front end (the CLI, the Python package)
// reads them. parse_config throws ConfigError, its message starting with `source`, for text
// that is not JSON (a syntax error, a number beyond double's range such as 1e400), nests deeper
// than kMaxJsonDepth or repeats a key in one object. read_config_file also throws Error naming
// the file when it cannot be read, is not a regular file (a FIFO, /dev/zero) or holds more than
// kMaxConfigFileBytes. Every create_* function checks the limits of tinyfuse/limits.h again, so
// json values built in C++ are held to them too.
json parse_config(const std::string& text, const std::string& source = "config");
json read_config_file(const std::string& path);

// The otypes this build accepts for each kind of object.
std::vector<std::string> network_otypes();
std::vector<std::string> encoding_otypes();
std::vector<std::string> loss_otypes();
std::vector<std::string> optimizer_otypes();

}  // namespace tinyfuse
