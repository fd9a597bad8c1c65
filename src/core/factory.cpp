// Turning JSON configs into objects of the requested backend. The rules of each otype are
// checked in core/*_config.cpp; this file only dispatches to a backend.
#include "tinyfuse/factory.h"

#include "core/config_reader.h"
#include "core/loss_config.h"
#include "core/network_config.h"
#include "core/network_with_input_encoding.h"
#include "cpu/encodings/make_encoding.h"
#include "cpu/losses.h"
#include "cpu/mlp.h"
#include "cpu/optimizers/optimizers.h"
#ifdef TINYFUSE_WITH_CUDA
#include "cuda/backend.h"
#include "cuda/encodings/make_encoding.h"
#endif

namespace tinyfuse {

namespace {

void check_cpu_precision(const BuildOptions& o) {
  if (o.cpu_precision != DType::F32 && o.cpu_precision != DType::F64)
    throw ConfigError("BuildOptions.cpu_precision", to_string(o.cpu_precision), "the CPU backend computes in f32 or f64",
                      "f32, f64");
}

[[noreturn]] void no_backend(const std::string& what, Device device) {
  throw ConfigError(what, "\"" + to_string(device) + "\"",
#ifdef TINYFUSE_WITH_CUDA
                    "this kind of object has no CUDA implementation in this version",
#else
                    "this build has no CUDA backend (configure with -DTINYFUSE_CUDA=ON)",
#endif
                    "cpu");
}

json network_hyperparams(const MlpSpec& s) {
  json h = {{"otype", s.otype},
            {"n_neurons", s.n_neurons},
            {"n_hidden_layers", s.n_hidden_layers},
            {"activation", to_string(s.activation)},
            {"output_activation", to_string(s.output_activation)}};
  if (s.otype == "FullyFusedMLP") h["precision"] = to_string(s.precision);
  return h;
}

}  // namespace

std::unique_ptr<Network> create_network(const json& config, uint32_t n_input_dims, uint32_t n_output_dims,
                                        const BuildOptions& options) {
  MlpSpec spec = parse_network_config(config, n_input_dims, n_output_dims, options.device);
  spec.fused_kernels = options.fused_kernels;
#ifdef TINYFUSE_WITH_CUDA
  if (options.device == Device::CUDA) return cuda::make_network(spec, network_hyperparams(spec));
#endif
  if (options.device != Device::CPU) no_backend("network.otype", options.device);
  check_cpu_precision(options);
  if (options.cpu_precision == DType::F64) return cpu::make_mlp<double>(spec, network_hyperparams(spec));
  return cpu::make_mlp<float>(spec, network_hyperparams(spec));
}

std::unique_ptr<Encoding> create_encoding(const json& config, uint32_t n_input_dims, const BuildOptions& options) {
  if (n_input_dims > kMaxModelWidth)  // output widths would overflow 32 bits (kMaxModelWidth)
    throw ConfigError("encoding.n_input_dims", std::to_string(n_input_dims), "encodings take at most 2^20 input dimensions",
                      "1 .. " + std::to_string(kMaxModelWidth));
#ifdef TINYFUSE_WITH_CUDA
  if (options.device == Device::CUDA) return cuda::make_encoding(config, "encoding", n_input_dims);
#endif
  if (options.device != Device::CPU) {
    read_otype(config.is_object() && !config.contains("otype") ? json{{"otype", "OneBlob"}} : config, "encoding",
               cpu::encoding_otypes());
    no_backend("encoding.otype", options.device);
  }
  check_cpu_precision(options);
  if (options.cpu_precision == DType::F64) return cpu::make_encoding<double>(config, "encoding", n_input_dims);
  return cpu::make_encoding<float>(config, "encoding", n_input_dims);
}

std::unique_ptr<Loss> create_loss(const json& config, const BuildOptions& options) {
  LossKind kind = parse_loss_config(config);
#ifdef TINYFUSE_WITH_CUDA
  if (options.device == Device::CUDA) return cuda::make_loss(kind);
#endif
  if (options.device != Device::CPU) no_backend("loss.otype", options.device);
  check_cpu_precision(options);
  if (options.cpu_precision == DType::F64) return cpu::make_loss<double>(kind);
  return cpu::make_loss<float>(kind);
}

std::unique_ptr<Optimizer> create_optimizer(const json& config, const BuildOptions& options) {
#ifdef TINYFUSE_WITH_CUDA
  if (options.device == Device::CUDA) return cuda::make_optimizer(config, "optimizer");
#endif
  if (options.device != Device::CPU) no_backend("optimizer.otype", options.device);
  return cpu::make_optimizer(config, "optimizer");
}

std::unique_ptr<DifferentiableObject> create_network_with_input_encoding(uint32_t n_input_dims, uint32_t n_output_dims,
                                                                         const json& encoding_config,
                                                                         const json& network_config,
                                                                         const BuildOptions& options) {
  std::shared_ptr<Encoding> encoding = create_encoding(encoding_config, n_input_dims, options);
  // The network's alignment depends only on its otype; read it before building the network,
  // with a stand-in input width every otype accepts (64: a multiple of 16, Width64FusedMLP's).
  MlpSpec probe = parse_network_config(network_config, 64, n_output_dims, options.device);
  encoding->set_alignment(probe.input_alignment);
  std::shared_ptr<Network> network = create_network(network_config, encoding->padded_output_width(), n_output_dims, options);
  return make_network_with_input_encoding(std::move(encoding), std::move(network));
}

Model create_from_config(uint32_t n_input_dims, uint32_t n_output_dims, const json& config, const BuildOptions& options,
                         uint64_t seed) {
  ConfigReader r(config, "", {"loss", "optimizer", "encoding", "network"});
  Model m;
  m.loss = create_loss(r.has("loss") ? r.get_object("loss") : json::object(), options);
  m.optimizer = create_optimizer(r.has("optimizer") ? r.get_object("optimizer") : json::object(), options);
  const json& net = r.get_object("network");
  if (r.has("encoding"))
    m.network = create_network_with_input_encoding(n_input_dims, n_output_dims, r.get_object("encoding"), net, options);
  else
    m.network = create_network(net, n_input_dims, n_output_dims, options);
  m.trainer = std::make_shared<Trainer>(m.network, m.optimizer, m.loss, seed);
  m.config = config;
  return m;
}

std::vector<std::string> network_otypes() { return network_otypes_on(Device::CPU); }
std::vector<std::string> encoding_otypes() { return cpu::encoding_otypes(); }
std::vector<std::string> loss_otypes() { return loss_names(); }
std::vector<std::string> optimizer_otypes() { return {"Adam", "SGD", "ExponentialDecay", "EMA", "Composite"}; }

}  // namespace tinyfuse
