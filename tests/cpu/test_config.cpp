// Config checking: every rejection names the key, the value, the rule and what would work.
#include <gtest/gtest.h>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

// Runs `fn`, expects a ConfigError, and returns it for inspection.
template <typename F>
ConfigError expect_config_error(F fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError";
  return ConfigError("", "", "", "");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Config, UnknownKeyIsNamedWithSuggestion) {
  auto e = expect_config_error([] {
    create_network({{"otype", "PortableMLP"}, {"n_neuron", 64}}, 4, 4);
  });
  EXPECT_EQ(e.key(), "network.n_neuron");
  EXPECT_EQ(e.value(), "64");
  EXPECT_TRUE(contains(e.rule(), "unknown key")) << e.what();
  EXPECT_TRUE(contains(e.rule(), "did you mean \"n_neurons\"")) << e.what();
  EXPECT_TRUE(contains(e.accepted(), "n_hidden_layers")) << e.what();
}

TEST(Config, MisspelledOtypeGetsSuggestion) {
  auto e = expect_config_error([] { create_network({{"otype", "FullyFusedMPL"}}, 16, 4); });
  EXPECT_EQ(e.key(), "network.otype");
  EXPECT_TRUE(contains(e.rule(), "did you mean \"FullyFusedMLP\"")) << e.what();
  auto l = expect_config_error([] { create_loss({{"otype", "RelativL2"}}); });
  EXPECT_TRUE(contains(l.rule(), "RelativeL2")) << l.what();
  auto a = expect_config_error([] { create_network({{"otype", "PortableMLP"}, {"activation", "Relu6"}}, 4, 4); });
  EXPECT_EQ(a.key(), "network.activation");
  EXPECT_TRUE(contains(a.accepted(), "Squareplus"));
}

TEST(Config, OtypesAndActivationsAreCaseInsensitive) {
  auto net = create_network({{"otype", "portablemlp"}, {"activation", "relu"}, {"n_neurons", 8}, {"n_hidden_layers", 1}}, 4, 4);
  EXPECT_EQ(net->name(), "PortableMLP");
  EXPECT_EQ(net->activation(), Activation::ReLU);
  EXPECT_EQ(create_loss({{"otype", "Mape"}})->name(), "MAPE");
}

TEST(Config, WrongTypesAndRanges) {
  auto t = expect_config_error([] { create_network({{"otype", "PortableMLP"}, {"n_neurons", "64"}}, 4, 4); });
  EXPECT_EQ(t.key(), "network.n_neurons");
  EXPECT_TRUE(contains(t.rule(), "must be an integer")) << t.what();
  auto f = expect_config_error([] { create_network({{"otype", "PortableMLP"}, {"n_neurons", 6.5}}, 4, 4); });
  EXPECT_TRUE(contains(f.rule(), "integer")) << f.what();
  auto r = expect_config_error([] { create_network({{"otype", "PortableMLP"}, {"n_neurons", 0}}, 4, 4); });
  EXPECT_TRUE(contains(r.rule(), "out of range")) << r.what();
  EXPECT_TRUE(contains(r.accepted(), "[1, 8192]")) << r.what();
  auto n = expect_config_error([] { create_network({{"otype", "PortableMLP"}, {"n_hidden_layers", -1}}, 4, 4); });
  EXPECT_EQ(n.key(), "network.n_hidden_layers");
  auto o = expect_config_error([] { create_network(json::array(), 4, 4); });
  EXPECT_EQ(o.key(), "network");
}

TEST(Config, FullyFusedMlpRules) {
  auto w = expect_config_error([] { create_network({{"otype", "FullyFusedMLP"}, {"n_neurons", 48}}, 16, 4); });
  EXPECT_EQ(w.key(), "network.n_neurons");
  EXPECT_TRUE(contains(w.accepted(), "16, 32, 64, 128")) << w.what();
  auto d = expect_config_error([] { create_network({{"otype", "FullyFusedMLP"}, {"n_hidden_layers", 0}}, 16, 4); });
  EXPECT_EQ(d.key(), "network.n_hidden_layers");
  auto i = expect_config_error([] { create_network({{"otype", "FullyFusedMLP"}, {"n_neurons", 64}}, 5, 4); });
  EXPECT_TRUE(contains(i.rule(), "multiple of 16")) << i.what();
  EXPECT_TRUE(contains(i.accepted(), "Identity")) << i.what();
  // The same network behind an encoding is fine: the encoding pads.
  EXPECT_NO_THROW(create_network_with_input_encoding(5, 4, {{"otype", "Identity"}}, {{"otype", "FullyFusedMLP"}, {"n_neurons", 64}}));
}

// FullyFusedMLP's optional "precision" (the GPU kernels' 16-bit storage type) is read on every
// backend, so a config means the same everywhere: the CPU accepts both values and computes in
// its own precision, and no other otype has the key.
TEST(Config, FullyFusedMlpPrecision) {
  for (const char* p : {"f16", "bf16", "BF16"}) {
    auto net = create_network({{"otype", "FullyFusedMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}, {"precision", p}}, 16, 4);
    EXPECT_EQ(net->param_dtype(), DType::F32) << p;
    EXPECT_EQ(net->hyperparams().at("precision"), std::string(p) == "f16" ? "f16" : "bf16");
  }
  EXPECT_EQ(create_network({{"otype", "FullyFusedMLP"}}, 16, 4)->hyperparams().at("precision"), "f16");
  auto v = expect_config_error([] { create_network({{"otype", "FullyFusedMLP"}, {"precision", "f32"}}, 16, 4); });
  EXPECT_EQ(v.key(), "network.precision");
  EXPECT_TRUE(contains(v.accepted(), "f16, bf16")) << v.what();
  auto t = expect_config_error([] { create_network({{"otype", "FullyFusedMLP"}, {"precision", 16}}, 16, 4); });
  EXPECT_EQ(t.key(), "network.precision");
  for (const char* other : {"CutlassMLP", "PortableMLP"}) {
    auto o = expect_config_error([&] { create_network({{"otype", other}, {"precision", "bf16"}}, 16, 4); });
    EXPECT_EQ(o.key(), "network.precision") << other;
    EXPECT_TRUE(contains(o.rule(), "unknown key")) << o.what();
  }
}

TEST(Config, TinyCudaNnDefaults) {
  auto net = create_network({{"otype", "CutlassMLP"}}, 16, 3);
  EXPECT_EQ(net->width(0), 128u);
  EXPECT_EQ(net->n_hidden_layers(), 5u);
  EXPECT_EQ(net->activation(), Activation::ReLU);
  EXPECT_EQ(net->output_activation(), Activation::None);
  EXPECT_FALSE(net->has_biases());
  EXPECT_EQ(create_network(json::object(), 16, 3)->name(), "CutlassMLP");  // tiny-cuda-nn's default "MLP"
  EXPECT_EQ(create_loss(json::object())->name(), "RelativeL2");
}

TEST(Config, GpuOnlyOtypesAreRejectedOnCpuWithAlternatives) {
  for (const char* otype : {"BlasLtMLP", "BlasLtMLPFP16", "Width64FusedMLP"}) {
    auto e = expect_config_error([&] { create_network({{"otype", otype}}, 64, 64); });
    EXPECT_EQ(e.key(), "network.otype");
    EXPECT_TRUE(contains(e.rule(), "only on CUDA")) << e.what();
    EXPECT_TRUE(contains(e.accepted(), "PortableMLP")) << e.what();
  }
}

TEST(Config, AmdNamesOnlyInHipBuilds) {
  auto e = expect_config_error([] { create_network({{"otype", "RocWMMAWidth64MLP"}}, 64, 64); });
  EXPECT_TRUE(contains(e.rule(), "HIP builds")) << e.what();
  EXPECT_TRUE(contains(e.accepted(), "Width64FusedMLP")) << e.what();
}

#ifndef TINYFUSE_WITH_CUDA
TEST(Config, CudaDeviceWithoutCudaBuildSaysHowToGetOne) {
  auto e = expect_config_error([] { create_network({{"otype", "PortableMLP"}}, 4, 4, {Device::CUDA}); });
  EXPECT_TRUE(contains(e.rule(), "-DTINYFUSE_CUDA=ON")) << e.what();
}
#endif

TEST(Config, WholeModelConfig) {
  json cfg = {{"loss", {{"otype", "L2"}}},
              {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-3}}},
              {"encoding", {{"otype", "Identity"}}},
              {"network", {{"otype", "PortableMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}}}};
  Model m = create_from_config(2, 3, cfg);
  EXPECT_EQ(m.network->input_width(), 2u);
  EXPECT_EQ(m.loss->name(), "L2");
  cfg["netwrok"] = cfg["network"];
  auto e = expect_config_error([&] { create_from_config(2, 3, cfg); });
  EXPECT_EQ(e.key(), "netwrok");
  EXPECT_TRUE(contains(e.rule(), "did you mean \"network\"")) << e.what();
}

TEST(Config, ZeroWidthsAreRejected) {
  EXPECT_THROW(create_network({{"otype", "PortableMLP"}}, 0, 4), ConfigError);
  EXPECT_THROW(create_network({{"otype", "PortableMLP"}}, 4, 0), ConfigError);
}

// Widths beyond 2^20 wrapped around in 32-bit arithmetic: 2^32 - 1 outputs padded to 0, a
// Frequency encoding of 2^31 inputs had output width 0. Now refused, naming the key.
TEST(Config, WidthsBeyondTheCapAreRejected) {
  const uint32_t over = (uint32_t{1} << 20) + 1;
  EXPECT_EQ(expect_config_error([&] { create_network({{"otype", "CutlassMLP"}}, 4, UINT32_MAX); }).key(), "network.n_output_dims");
  EXPECT_EQ(expect_config_error([&] { create_network({{"otype", "PortableMLP"}}, over, 4); }).key(), "network.n_input_dims");
  EXPECT_EQ(expect_config_error([&] { create_encoding({{"otype", "Frequency"}}, uint32_t{1} << 31); }).key(), "encoding.n_input_dims");
  EXPECT_EQ(expect_config_error([&] { create_encoding({{"otype", "OneBlob"}}, over); }).key(), "encoding.n_input_dims");
  // At the cap itself all is exact: the widest per-dimension output (1024 OneBlob bins) fits.
  EXPECT_EQ(create_encoding({{"otype", "OneBlob"}, {"n_bins", 1024}}, uint32_t{1} << 20)->output_width(), uint32_t{1} << 30);
  EXPECT_EQ(create_network({{"otype", "CutlassMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}}, 4, uint32_t{1} << 20)->padded_output_width(),
            uint32_t{1} << 20);
}

}  // namespace
