// Width64FusedMLP's fail-closed config rules and build gate, checked without a GPU. The rules
// hold in every build (they are checked before whether this build runs the otype), so each
// wrong key is reported the same way by a CPU-only build and a CUDA build.
#include <gtest/gtest.h>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

const BuildOptions kCuda{Device::CUDA};

json width64(json extra = json::object()) {
  json c = {{"otype", "Width64FusedMLP"}};
  for (auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

ConfigError config_error(const json& config, uint32_t in, uint32_t out, const BuildOptions& o) {
  try {
    create_network(config, in, out, o);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError for " << config.dump();
  return ConfigError("", "", "", "");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Every rule names its key, says what the network runs and points at the general networks.
void expect_shape_rule(const ConfigError& e, const std::string& key, const std::string& accepted) {
  EXPECT_EQ(e.key(), key) << e.what();
  EXPECT_TRUE(contains(e.rule(), "64 -> 64 -> 64 -> 64")) << e.what();
  EXPECT_TRUE(contains(e.accepted(), accepted)) << e.what();
  EXPECT_TRUE(contains(e.accepted(), "BlasLtMLPFP16")) << e.what();
}

TEST(Width64Config, WrongWidthIsRejected) {
  expect_shape_rule(config_error(width64({{"n_neurons", 128}}), 64, 64, kCuda), "network.n_neurons", "64");
  expect_shape_rule(config_error(width64({{"n_neurons", 32}}), 64, 64, kCuda), "network.n_neurons", "64");
  expect_shape_rule(config_error(width64(), 32, 64, kCuda), "network.n_input_dims", "64");
  expect_shape_rule(config_error(width64(), 64, 16, kCuda), "network.n_output_dims", "64");
  expect_shape_rule(config_error(width64(), 65, 64, kCuda), "network.n_input_dims", "64");
}

TEST(Width64Config, WrongDepthIsRejected) {
  expect_shape_rule(config_error(width64({{"n_hidden_layers", 3}}), 64, 64, kCuda), "network.n_hidden_layers", "2");
  expect_shape_rule(config_error(width64({{"n_hidden_layers", 1}}), 64, 64, kCuda), "network.n_hidden_layers", "2");
  expect_shape_rule(config_error(width64({{"n_hidden_layers", 0}}), 64, 64, kCuda), "network.n_hidden_layers", "2");
}

TEST(Width64Config, WrongActivationsAreRejected) {
  for (const char* act : {"Tanh", "LeakyReLU", "None", "Sine"})
    expect_shape_rule(config_error(width64({{"activation", act}}), 64, 64, kCuda), "network.activation", "ReLU");
  for (const char* act : {"ReLU", "Sigmoid"}) {
    const ConfigError e = config_error(width64({{"output_activation", act}}), 64, 64, kCuda);
    expect_shape_rule(e, "network.output_activation", "None");
    EXPECT_TRUE(contains(e.rule(), "no output activation")) << e.what();
  }
}

// The precision is FP16 on CUDA: another "precision" is refused by name, and asking the CPU
// backend for the network, in FP32 or FP64, is refused with the CPU network of its layout.
TEST(Width64Config, OtherPrecisionsAreRejected) {
  for (const char* p : {"bf16", "f32", "F32"}) {
    const ConfigError e = config_error(width64({{"precision", p}}), 64, 64, kCuda);
    EXPECT_EQ(e.key(), "network.precision") << e.what();
    EXPECT_TRUE(contains(e.rule(), "FP16")) << e.what();
    EXPECT_TRUE(contains(e.accepted(), "f16")) << e.what();
  }
  for (DType p : {DType::F32, DType::F64}) {
    const ConfigError e = config_error(width64(), 64, 64, {Device::CPU, p});
    EXPECT_EQ(e.key(), "network.otype") << e.what();
    EXPECT_TRUE(contains(e.rule(), "only on CUDA")) << e.what();
    EXPECT_TRUE(contains(e.rule(), "FP16")) << e.what();
    EXPECT_TRUE(contains(e.rule(), "PortableMLP")) << e.what();
    EXPECT_TRUE(contains(e.accepted(), "PortableMLP")) << e.what();
  }
}

TEST(Width64Config, UnknownKeysAndTypesAreRejected) {
  const ConfigError e = config_error(width64({{"n_neuron", 64}}), 64, 64, kCuda);
  EXPECT_EQ(e.key(), "network.n_neuron") << e.what();
  EXPECT_TRUE(contains(e.rule(), "unknown key")) << e.what();
  EXPECT_EQ(config_error(width64({{"n_neurons", "64"}}), 64, 64, kCuda).key(), "network.n_neurons");
}

// The encoding probe of create_network_with_input_encoding must not trip over the fixed input
// width: the CPU refusal is about the device, not about a stand-in width.
TEST(Width64Config, BehindAnEncodingTheRefusalIsAboutTheDevice) {
  try {
    create_network_with_input_encoding(3, 64, {{"otype", "Identity"}}, width64());
    ADD_FAILURE() << "Width64FusedMLP built on the CPU";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "network.otype") << e.what();
    EXPECT_TRUE(contains(e.rule(), "only on CUDA")) << e.what();
  }
}

#ifdef TINYFUSE_WITH_WIDTH64_FUSED
// Built with the option: the default config is the one network, with the documented layout.
// Construction needs no device (nothing runs until inference()).
TEST(Width64Config, DefaultsDescribeTheOneNetwork) {
  auto net = create_network(width64(), 64, 64, kCuda);
  EXPECT_EQ(net->name(), "Width64FusedMLP");
  EXPECT_EQ(net->n_params(), 12480u);
  EXPECT_EQ(net->n_hidden_layers(), 2u);
  EXPECT_EQ(net->width(0), 64u);
  EXPECT_EQ(net->padded_output_width(), 64u);
  EXPECT_TRUE(net->has_biases());
  EXPECT_EQ(net->param_dtype(), DType::F16);
  EXPECT_EQ(net->input_dtype(), DType::F16);
  EXPECT_EQ(net->output_dtype(), DType::F16);
  EXPECT_EQ(net->required_input_alignment(), 64u);
  // One layout (docs/PARAMETERS.md): that of PortableMLP 64 -> 64 x 2 -> 64.
  auto ref = create_network({{"otype", "PortableMLP"}, {"n_neurons", 64}, {"n_hidden_layers", 2}}, 64, 64);
  const auto a = net->param_segments(), b = ref->param_segments();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].offset, b[i].offset);
    EXPECT_EQ(a[i].count, b[i].count);
    EXPECT_EQ(a[i].kind, b[i].kind);
  }
  std::vector<float> pa(12480), pb(12480);
  Pcg32 r1(9), r2(9);
  net->initialize_params(r1, pa.data());
  ref->initialize_params(r2, pb.data());
  EXPECT_EQ(pa, pb);
}

TEST(Width64Config, TrainingForwardIsRejected) {
  auto net = create_network(width64(), 64, 64, kCuda);
  const TensorView x = TensorView::matrix(nullptr, DType::F16, Device::CUDA, 16, 64);
  try {
    net->forward(x, nullptr);
    ADD_FAILURE() << "forward() ran";
  } catch (const UnsupportedError& e) {
    EXPECT_TRUE(contains(e.what(), "inference-only")) << e.what();
    EXPECT_TRUE(contains(e.what(), "BlasLtMLPFP16")) << e.what();
  }
}
#else
// Built without the option: the otype is refused on CUDA with how to enable it.
TEST(Width64Config, BuiltWithoutTheOptionSaysHowToEnableIt) {
  const ConfigError e = config_error(width64(), 64, 64, kCuda);
  EXPECT_EQ(e.key(), "network.otype") << e.what();
  EXPECT_TRUE(contains(e.rule(), "-DTINYFUSE_WIDTH64_FUSED=ON")) << e.what();
  EXPECT_TRUE(contains(e.rule(), "-DTINYFUSE_CUDA=ON")) << e.what();
}
#endif

}  // namespace
