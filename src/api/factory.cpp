// Turning JSON configs into objects of the requested backend. The rules of each otype are
// checked in core/*_config.cpp, which devices run it is the otype table's (core/otypes.h); this
// file only dispatches to a backend. It stands above the backends: the one place that includes
// their headers.
#include "tinyfuse/factory.h"

#include "api/factory_internal.h"
#include "core/config_limits.h"
#include "core/config_reader.h"
#include "core/loss_config.h"
#include "core/network_config.h"
#include "core/network_with_input_encoding.h"
#include "core/optimizer_config.h"
#include "core/otypes.h"
#include "cpu/encodings/make_encoding.h"
#include "cpu/losses.h"
#include "cpu/mlp.h"
#include "cpu/optimizers/cpu_optimizer.h"
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

// A device this build has no backend for (the otype table says why).
[[noreturn]] void no_backend(const std::string& what, Device device) {
  throw ConfigError(what, "\"" + to_string(device) + "\"", backend_missing_reason(device), "cpu");
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

// tiny-cuda-nn's NetworkWithInputEncoding sets the network's n_input_dims to the encoding's padded
// width; a config that names the unpadded width (as written for tiny-cuda-nn) means that network.
json with_padded_input(const json& network_config, uint32_t unpadded, uint32_t padded) {
  if (unpadded == padded || !network_config.is_object() || !network_config.contains("n_input_dims")) return network_config;
  const json& given = network_config.at("n_input_dims");
  if (!given.is_number() || given.get<double>() != unpadded) return network_config;
  json local = network_config;
  local["n_input_dims"] = padded;
  return local;
}

}  // namespace

uint32_t network_input_alignment(const json& network_config, Device device) {
  // The alignment depends only on the otype: read with stand-in widths every otype accepts (64: a
  // multiple of 16, Width64FusedMLP's), the config's own width keys left out of this reading.
  json probe = network_config;
  if (probe.is_object()) {
    probe.erase("n_input_dims");
    probe.erase("n_output_dims");
  }
  return parse_network_config(probe, 64, 64, device).input_alignment;
}

std::unique_ptr<Network> create_network(const json& config, uint32_t n_input_dims, uint32_t n_output_dims,
                                        const BuildOptions& options) {
  UnknownKeySink keys(options.ignored_keys);
  check_section_config_limits(config, "network");
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
  UnknownKeySink keys(options.ignored_keys);
  check_section_config_limits(config, "encoding");
  if (n_input_dims > kMaxModelWidth)  // output widths would overflow 32 bits (kMaxModelWidth)
    throw ConfigError("encoding.n_input_dims", std::to_string(n_input_dims), "encodings take at most 2^20 input dimensions",
                      "1 .. " + std::to_string(kMaxModelWidth));
#ifdef TINYFUSE_WITH_CUDA
  if (options.device == Device::CUDA) return cuda::make_encoding(config, "encoding", n_input_dims);
#endif
  if (options.device != Device::CPU) {
    read_otype(config.is_object() && !config.contains("otype") ? json{{"otype", "OneBlob"}} : config, "encoding",
               otype_names(ObjectKind::Encoding));
    no_backend("encoding.otype", options.device);
  }
  check_cpu_precision(options);
  if (options.cpu_precision == DType::F64) return cpu::make_encoding<double>(config, "encoding", n_input_dims);
  return cpu::make_encoding<float>(config, "encoding", n_input_dims);
}

std::unique_ptr<Loss> create_loss(const json& config, const BuildOptions& options) {
  UnknownKeySink keys(options.ignored_keys);
  check_section_config_limits(config, "loss");
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
  UnknownKeySink keys(options.ignored_keys);
  check_section_config_limits(config, "optimizer");
#ifdef TINYFUSE_WITH_CUDA
  if (options.device == Device::CUDA) return cuda::make_optimizer(parse_optimizer_config(config, "optimizer"));
#endif
  if (options.device != Device::CPU) no_backend("optimizer.otype", options.device);
  return cpu::make_cpu_optimizer(parse_optimizer_config(config, "optimizer"));
}

std::unique_ptr<DifferentiableObject> create_network_with_input_encoding(uint32_t n_input_dims, uint32_t n_output_dims,
                                                                         const json& encoding_config,
                                                                         const json& network_config,
                                                                         const BuildOptions& options) {
  UnknownKeySink keys(options.ignored_keys);
  check_section_config_limits(network_config, "network");
  std::shared_ptr<Encoding> encoding = create_encoding(encoding_config, n_input_dims, options);
  encoding->set_alignment(network_input_alignment(network_config, options.device));
  const json local = with_padded_input(network_config, encoding->output_width(), encoding->padded_output_width());
  std::shared_ptr<Network> network = create_network(local, encoding->padded_output_width(), n_output_dims, options);
  return make_network_with_input_encoding(std::move(encoding), std::move(network));
}

std::unique_ptr<DifferentiableObject> create_padded_network(uint32_t n_input_dims, uint32_t n_output_dims,
                                                            const json& network_config, const BuildOptions& options) {
  UnknownKeySink keys(options.ignored_keys);
  if (n_input_dims % network_input_alignment(network_config, options.device) == 0)
    return create_network(network_config, n_input_dims, n_output_dims, options);
  return create_network_with_input_encoding(n_input_dims, n_output_dims, {{"otype", "Identity"}}, network_config, options);
}

Model create_model_objects(uint32_t n_input_dims, uint32_t n_output_dims, const json& config,
                           const BuildOptions& options) {
  UnknownKeySink keys(options.ignored_keys);
  check_model_config_limits(config);
  ConfigReader r(config, "", {"loss", "optimizer", "encoding", "network"});
  Model m;
  m.loss = create_loss(r.has("loss") ? r.get_object("loss") : json::object(), options);
  m.optimizer = create_optimizer(r.has("optimizer") ? r.get_object("optimizer") : json::object(), options);
  const json& net = r.get_object("network");
  if (r.has("encoding"))
    m.network = create_network_with_input_encoding(n_input_dims, n_output_dims, r.get_object("encoding"), net, options);
  else
    m.network = create_network(net, n_input_dims, n_output_dims, options);
  m.config = config;
  return m;
}

Model create_from_config(uint32_t n_input_dims, uint32_t n_output_dims, const json& config, const BuildOptions& options,
                         uint64_t seed) {
  Model m = create_model_objects(n_input_dims, n_output_dims, config, options);
  m.trainer = std::make_shared<Trainer>(m.network, m.optimizer, m.loss, seed);
  return m;
}

std::vector<std::string> network_otypes() { return otype_names_built_on(ObjectKind::Network, Device::CPU); }
std::vector<std::string> encoding_otypes() { return otype_names_built_on(ObjectKind::Encoding, Device::CPU); }
std::vector<std::string> loss_otypes() { return otype_names_built_on(ObjectKind::Loss, Device::CPU); }
std::vector<std::string> optimizer_otypes() { return otype_names_built_on(ObjectKind::Optimizer, Device::CPU); }

}  // namespace tinyfuse
