// The otype table (src/core/otypes.h) against what the factory builds: every otype it says this
// build runs on the CPU builds there, under its canonical name (aliases under the otype they
// stand for), and every one it says the CPU does not run is refused with the table's reason.
#include <gtest/gtest.h>

#include <string>

#include "core/otypes.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

std::string canonical(const OtypeEntry& e) { return e.alias_of ? e.alias_of : e.name; }

// The smallest config of each otype that needs more than its name.
json config_of(const OtypeEntry& e) {
  const std::string n = e.name;
  json c = {{"otype", n}};
  if (e.kind == ObjectKind::Network) {
    c["n_neurons"] = 16;
    c["n_hidden_layers"] = 1;
  }
  if (e.kind == ObjectKind::Encoding && n == "Composite") c["nested"] = {{{"otype", "Identity"}}};
  if (e.kind == ObjectKind::Optimizer && n == "Composite") c["nested"] = {{{"otype", "SGD"}, {"n_params_to_optimize", 16 * 16 + 16}}};
  return c;
}

TEST(Otypes, TheTableListsEachNameOncePerKind) {
  for (ObjectKind kind : {ObjectKind::Network, ObjectKind::Encoding, ObjectKind::Loss, ObjectKind::Optimizer}) {
    const std::vector<std::string> names = otype_names(kind);
    ASSERT_FALSE(names.empty());
    for (size_t i = 0; i < names.size(); ++i)
      for (size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
  }
}

TEST(Otypes, EveryCpuOtypeBuildsUnderItsCanonicalName) {
  for (const OtypeEntry& e : otype_table()) {
    if (!otype_built_on(e.kind, e.name, Device::CPU)) continue;
    SCOPED_TRACE(e.name);
    const json c = config_of(e);
    switch (e.kind) {
      case ObjectKind::Network: EXPECT_EQ(create_network(c, 16, 16)->name(), canonical(e)); break;
      case ObjectKind::Encoding: {
        // NRC reads at least 8 dims, SphericalHarmonics exactly 3.
        const uint32_t dims = canonical(e) == "NRC" ? 8 : std::string(e.name) == "SphericalHarmonics" ? 3 : 2;
        auto enc = create_encoding(c, dims);
        EXPECT_EQ(enc->input_width(), dims);
        break;
      }
      case ObjectKind::Loss: EXPECT_EQ(create_loss(c)->name(), canonical(e)); break;
      case ObjectKind::Optimizer: {
        auto opt = create_optimizer(c);
        EXPECT_EQ(opt->name(), canonical(e));
        opt->allocate(16 * 16 + 16, {});
        break;
      }
    }
  }
  EXPECT_EQ(network_otypes(), otype_names_built_on(ObjectKind::Network, Device::CPU));
  EXPECT_EQ(encoding_otypes(), otype_names(ObjectKind::Encoding));
  EXPECT_EQ(loss_otypes(), otype_names(ObjectKind::Loss));
  EXPECT_EQ(optimizer_otypes(), otype_names(ObjectKind::Optimizer));
}

TEST(Otypes, NetworksTheCpuDoesNotRunAreRefusedWithTheTablesReason) {
  for (const std::string& n : otype_names(ObjectKind::Network)) {
    if (otype_built_on(ObjectKind::Network, n, Device::CPU)) continue;
    SCOPED_TRACE(n);
    try {
      create_network({{"otype", n}}, 64, 64);
      ADD_FAILURE() << n << " built on the CPU";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "network.otype");
      EXPECT_NE(e.rule().find(otype_unavailable_reason(ObjectKind::Network, n, Device::CPU)), std::string::npos) << e.what();
      EXPECT_EQ(e.accepted(), "PortableMLP, FullyFusedMLP, CutlassMLP, MLP, MegakernelMLP") << e.what();
    }
  }
}

#ifndef TINYFUSE_WITH_CUDA
TEST(Otypes, WithoutCudaNothingIsBuiltForCuda) {
  EXPECT_FALSE(backend_built(Device::CUDA));
  for (const OtypeEntry& e : otype_table()) EXPECT_FALSE(otype_built_on(e.kind, e.name, Device::CUDA)) << e.name;
  try {
    create_encoding({{"otype", "Frequency"}}, 3, {Device::CUDA});
    ADD_FAILURE() << "an encoding built for CUDA";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.rule().find("-DTINYFUSE_CUDA=ON"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
