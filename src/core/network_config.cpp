#include "core/network_config.h"

#include <algorithm>

#include "core/config_reader.h"
#include "core/otypes.h"

namespace tinyfuse {

namespace {

constexpr uint32_t kTensorCoreAlignment = 16;  // tiny-cuda-nn's output padding and input alignment

// Width64FusedMLP is one network: 64 -> 64 -> 64 -> 64, ReLU hidden layers, no output activation.
constexpr uint32_t kWidth64 = 64, kWidth64HiddenLayers = 2;
constexpr const char* kWidth64Alternatives = "BlasLtMLPFP16 or PortableMLP (same layout, any shape and activation)";

// Fail-closed rules of Width64FusedMLP: every key must describe exactly the network it runs.
// Its widths and depth default to that network, not to tiny-cuda-nn's 128 x 5.
void check_width64_fused(const ConfigReader& r, MlpSpec& spec, uint32_t n_input_dims, uint32_t n_output_dims) {
  const std::string only = "Width64FusedMLP runs only 64 -> 64 -> 64 -> 64 with ReLU hidden layers";
  const std::string other = std::string("; for other networks use ") + kWidth64Alternatives;
  spec.n_neurons = r.get_uint("n_neurons", kWidth64, 1, 8192);
  if (spec.n_neurons != kWidth64) r.fail("n_neurons", only, "64" + other);
  spec.n_hidden_layers = r.get_uint("n_hidden_layers", kWidth64HiddenLayers, 0, 64);
  if (spec.n_hidden_layers != kWidth64HiddenLayers) r.fail("n_hidden_layers", only, "2" + other);
  if (spec.activation != Activation::ReLU) r.fail("activation", only, "ReLU" + other);
  if (spec.output_activation != Activation::None)
    r.fail("output_activation", only + " and no output activation", "None" + other);
  // "precision" as FullyFusedMLP spells it, so asking for another is an error here, not an unknown key.
  if (r.has("precision") && !equals_case_insensitive(r.get_string("precision", "f16"), "f16"))
    r.fail("precision", "Width64FusedMLP runs FP16 parameters, inputs and outputs only",
           "f16; for bf16 use FullyFusedMLP, for f32 BlasLtMLP or PortableMLP");
  spec.precision = DType::F16;
  if (n_input_dims != kWidth64)
    throw ConfigError(r.key_path("n_input_dims"), std::to_string(n_input_dims), only,
                      "64 (an encoding in front is padded to 64)" + other);
  if (n_output_dims != kWidth64)
    throw ConfigError(r.key_path("n_output_dims"), std::to_string(n_output_dims), only, "64" + other);
}

// Why `otype` cannot be built for `device` here, and how to get it.
std::string not_available_rule(const std::string& otype, Device device) {
  if (device == Device::CPU && otype == "Width64FusedMLP")
    return otype + " runs only on CUDA devices (FP16 tensor-core kernels; PortableMLP is the CPU network with its layout)";
  return otype_unavailable_reason(ObjectKind::Network, otype, device);
}

}  // namespace

MlpSpec parse_network_config(const json& config, uint32_t n_input_dims, uint32_t n_output_dims, Device device,
                             const std::string& path) {
  const std::vector<std::string> known = otype_names(ObjectKind::Network);
#ifndef TINYFUSE_WITH_HIP
  // The seed's AMD names mean nothing outside a HIP build; say so rather than "unknown".
  if (config.is_object() && config.contains("otype") && config["otype"].is_string()) {
    const std::string o = config["otype"].get<std::string>();
    for (const char* amd : {"HipBLASLtMLP", "HipBLASLtMLPFP16", "RocWMMAWidth64MLP"})
      if (equals_case_insensitive(o, amd))
        throw ConfigError(path + ".otype", "\"" + o + "\"", "AMD otype names are accepted only in HIP builds",
                          "BlasLtMLP, BlasLtMLPFP16, Width64FusedMLP (the same networks by their portable names)");
  }
#endif
  const json defaulted = config.is_object() && !config.contains("otype") ? [&] {
    json c = config;
    c["otype"] = "MLP";  // tiny-cuda-nn's default
    return c;
  }() : config;
  MlpSpec spec;
  spec.otype = canonical_otype(ObjectKind::Network, read_otype(defaulted, path, known));  // tiny-cuda-nn's aliases
  std::vector<std::string> keys = {"n_neurons", "n_hidden_layers", "activation", "output_activation", "n_input_dims", "n_output_dims"};
  if (spec.otype == "FullyFusedMLP" || spec.otype == "Width64FusedMLP") keys.push_back("precision");
  ConfigReader r(defaulted, path, keys);

  if (r.has("n_input_dims") && r.get_uint("n_input_dims", 0, 0, UINT32_MAX) != n_input_dims)
    r.fail("n_input_dims", "differs from the model's input width " + std::to_string(n_input_dims), std::to_string(n_input_dims));
  if (r.has("n_output_dims") && r.get_uint("n_output_dims", 0, 0, UINT32_MAX) != n_output_dims)
    r.fail("n_output_dims", "differs from the model's output width " + std::to_string(n_output_dims), std::to_string(n_output_dims));

  spec.input_width = n_input_dims;
  spec.output_width = n_output_dims;
  spec.activation = parse_activation(r.get_string("activation", "ReLU"), r.key_path("activation"));
  spec.output_activation = parse_activation(r.get_string("output_activation", "None"), r.key_path("output_activation"));
  if (n_input_dims == 0) throw ConfigError(path + ".n_input_dims", "0", "a network needs at least one input", ">= 1");
  if (n_output_dims == 0) throw ConfigError(path + ".n_output_dims", "0", "a network needs at least one output", ">= 1");
  // Widths are 32-bit and padded up to multiples of 16: the cap keeps that arithmetic exact
  // (2^32 - 1 outputs were padded to 0 before).
  for (const auto& [key, width] : {std::pair<const char*, uint32_t>{"n_input_dims", n_input_dims}, {"n_output_dims", n_output_dims}})
    if (width > kMaxModelWidth)
      throw ConfigError(path + "." + key, std::to_string(width), "widths are limited to 2^20 (widths and padded widths are 32-bit)",
                        "1 .. " + std::to_string(kMaxModelWidth));

  if (spec.otype == "Width64FusedMLP") {
    check_width64_fused(r, spec, n_input_dims, n_output_dims);
  } else if (spec.otype == "FullyFusedMLP") {
    spec.n_neurons = r.get_uint("n_neurons", 128, 16, 128);
    if (spec.n_neurons != 16 && spec.n_neurons != 32 && spec.n_neurons != 64 && spec.n_neurons != 128)
      r.fail("n_neurons", "FullyFusedMLP runs hidden widths of tensor-core tiles only", "16, 32, 64, 128 (or CutlassMLP / PortableMLP for any width)");
    spec.n_hidden_layers = r.get_uint("n_hidden_layers", 5, 1, 64);
    spec.precision = r.get_choice("precision", "f16", {"f16", "bf16"}) == "bf16" ? DType::BF16 : DType::F16;
  } else {
    spec.n_neurons = r.get_uint("n_neurons", 128, 1, 8192);
    spec.n_hidden_layers = r.get_uint("n_hidden_layers", 5, 0, 64);
  }

  if (spec.otype == "FullyFusedMLP" || spec.otype == "CutlassMLP") {
    // tiny-cuda-nn semantics: no biases, output padded to 16, input aligned to 16.
    spec.biases = false;
    spec.padded_output_width = next_multiple(n_output_dims, kTensorCoreAlignment);
    spec.input_alignment = kTensorCoreAlignment;
    if (spec.otype == "FullyFusedMLP" && n_input_dims % kTensorCoreAlignment != 0)
      throw ConfigError(path + ".n_input_dims", std::to_string(n_input_dims),
                        "FullyFusedMLP reads inputs in 16-wide tiles, so its input width must be a multiple of 16",
                        "a multiple of 16; put an encoding in front (NetworkWithInputEncoding with {\"otype\": \"Identity\"} pads with 1s, as tiny-cuda-nn)");
  } else {
    spec.biases = true;
    spec.padded_output_width = n_output_dims;
    spec.input_alignment = spec.otype == "Width64FusedMLP" ? kWidth64 : 1;
  }
  // Whether this build runs the otype on `device` comes last: an otype's rules hold in every
  // build, so a CPU-only build reports a wrong shape the same way a CUDA build does.
  if (!otype_built_on(ObjectKind::Network, spec.otype, device)) {
    const std::string accepted = join(otype_names_built_on(ObjectKind::Network, device));
    r.fail("otype", not_available_rule(spec.otype, device),
           accepted.empty() ? "none on " + to_string(device) + " in this build" : accepted);
  }
  return spec;
}

}  // namespace tinyfuse
