// What tiny-cuda-nn's users bring along: keys of their own in shared configs (ignored when the
// caller asks, strict otherwise), keys tiny-cuda-nn reads that change nothing here
// (fixed_point_pos), its otype aliases, and its Python Network, which pads any input width to the
// network's alignment (create_padded_network).
//
// Formulas are tiny-cuda-nn's at commit 6ee3546bda615f51abe684ce9edefeb414689135:
// src/cutlass_mlp.cu and src/fully_fused_mlp.cu (weight matrices, output padded to 16),
// src/cpp_api.cu (create_network = NetworkWithInputEncoding with an Identity encoding) and
// src/network.cu (minimum_alignment: 16 for both MLPs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

uint32_t next16(uint32_t n) { return (n + 15) / 16 * 16; }

// tiny-cuda-nn's parameter count of FullyFusedMLP / CutlassMLP behind its Python Network: the
// input padded to 16, no biases, the output padded to 16.
size_t tcnn_mlp_params(uint32_t n_in, uint32_t n_out, uint32_t neurons, uint32_t hidden) {
  const size_t in = next16(n_in), out = next16(n_out);
  if (hidden == 0) return out * in;
  return neurons * in + size_t(hidden - 1) * neurons * neurons + out * neurons;
}

TEST(TcnnCompat, IgnoredKeysAreReportedOnlyWhenAsked) {
  const json net = {{"otype", "PortableMLP"}, {"n_neuron", 8}, {"include_xyz", true}, {"n_hidden_layers", 1}};
  // The C++ API stays strict.
  EXPECT_THROW(create_network(net, 4, 2), ConfigError);
  std::vector<ConfigError> ignored;
  BuildOptions lenient;
  lenient.ignored_keys = &ignored;
  auto n = create_network(net, 4, 2, lenient);
  EXPECT_EQ(n->width(0), 128u) << "the misspelt n_neuron was ignored, so the default width";
  ASSERT_EQ(ignored.size(), 2u);
  EXPECT_EQ(ignored[0].key(), "network.include_xyz");  // JSON objects iterate in key order
  EXPECT_EQ(ignored[1].key(), "network.n_neuron");
  EXPECT_TRUE(contains(ignored[1].rule(), "did you mean \"n_neurons\"")) << ignored[1].what();
  EXPECT_TRUE(contains(ignored[1].accepted(), "n_hidden_layers")) << ignored[1].what();
  // Every other rule still holds.
  EXPECT_THROW(create_network({{"otype", "PortableMLP"}, {"n_neurons", "8"}, {"x", 1}}, 4, 2, lenient), ConfigError);
}

TEST(TcnnCompat, IgnoredKeysOfAWholeModelAreNamedOnceWithTheirPaths) {
  const json cfg = {
      {"loss", {{"otype", "L2"}, {"scale", 2}}},
      {"optimizer", {{"otype", "ExponentialDecay"}, {"nested", {{"otype", "Adam"}, {"update_steps", 4}}}}},
      {"encoding",
       {{"otype", "Composite"},
        {"nested", {{{"otype", "HashGrid"}, {"n_dims_to_encode", 2}, {"start_level", 4}, {"n_levels", 4},
                     {"log2_hashmap_size", 8}},
                    {{"otype", "Identity"}}}}}},
      {"network", {{"otype", "FullyFusedMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}, {"start_step", 0}}},
      {"include_xyz", true}};
  std::vector<ConfigError> ignored;
  BuildOptions lenient;
  lenient.ignored_keys = &ignored;
  Model m = create_from_config(3, 2, cfg, lenient);
  std::vector<std::string> keys;
  for (const auto& e : ignored) keys.push_back(e.key());
  std::sort(keys.begin(), keys.end());
  // network.start_step is read twice (the alignment probe, then the network): reported once.
  EXPECT_EQ(keys, (std::vector<std::string>{"encoding.nested[0].start_level", "include_xyz", "loss.scale",
                                            "network.start_step", "optimizer.nested.update_steps"}));
  EXPECT_EQ(m.network->n_params(), create_from_config(3, 2, [&] {
                                     json c = cfg;
                                     c.erase("include_xyz");
                                     c["loss"].erase("scale");
                                     c["optimizer"]["nested"].erase("update_steps");
                                     c["encoding"]["nested"][0].erase("start_level");
                                     c["network"].erase("start_step");
                                     return c;
                                   }())
                                       .network->n_params());
  EXPECT_THROW(create_from_config(3, 2, cfg), ConfigError);
}

TEST(TcnnCompat, FixedPointPosIsAcceptedAndChangesNothing) {
  const json base = {{"otype", "HashGrid"}, {"n_levels", 4}, {"log2_hashmap_size", 10}, {"per_level_scale", 1.5}};
  json fixed = base;
  fixed["fixed_point_pos"] = true;
  auto a = create_encoding(base, 2), b = create_encoding(fixed, 2);
  EXPECT_EQ(a->hyperparams()["fixed_point_pos"], false);
  EXPECT_EQ(b->hyperparams()["fixed_point_pos"], true);
  ASSERT_EQ(a->n_params(), b->n_params());
  std::vector<float> params(a->n_params()), x(64 * 2), ya(64 * 8), yb(64 * 8);
  Pcg32 rng(3);
  a->initialize_params(rng, params.data());
  for (auto& p : params) p *= 1e4f;  // O(1) features
  for (auto& v : x) v = rng.next_float();
  for (auto* e : {a.get(), b.get()}) {
    auto pv = TensorView::vector(params.data(), int64_t(params.size()));
    e->set_params(pv, pv, {});
  }
  a->inference(TensorView::matrix(x.data(), 64, 2), TensorView::matrix(ya.data(), 64, 8));
  b->inference(TensorView::matrix(x.data(), 64, 2), TensorView::matrix(yb.data(), 64, 8));
  EXPECT_EQ(ya, yb);
  json not_bool = base;
  not_bool["fixed_point_pos"] = 1;
  EXPECT_THROW(create_encoding(not_bool, 2), ConfigError);  // a boolean, as there
}

TEST(TcnnCompat, MegakernelMlpIsFullyFusedMlp) {
  auto n = create_network({{"otype", "megakernelmlp"}, {"n_neurons", 16}, {"n_hidden_layers", 1}}, 16, 3);
  EXPECT_EQ(n->name(), "FullyFusedMLP");
  EXPECT_EQ(n->n_params(), tcnn_mlp_params(16, 3, 16, 1));
}

TEST(TcnnCompat, PaddedNetworkParameterCountsAreTinyCudaNns) {
  for (const char* otype : {"FullyFusedMLP", "CutlassMLP"})
    for (uint32_t n_in : {1u, 3u, 15u, 16u, 17u, 31u, 32u, 63u, 64u, 100u})
      for (uint32_t n_out : {1u, 3u, 16u, 17u})
        for (uint32_t hidden : {0u, 1u, 3u}) {
          if (hidden == 0 && std::string(otype) == "FullyFusedMLP") continue;  // needs a hidden layer, as there
          const json cfg = {{"otype", otype}, {"n_neurons", 32}, {"n_hidden_layers", hidden}};
          auto net = create_padded_network(n_in, n_out, cfg);
          SCOPED_TRACE(cfg.dump() + " " + std::to_string(n_in) + " -> " + std::to_string(n_out));
          EXPECT_EQ(net->n_params(), tcnn_mlp_params(n_in, n_out, 32, hidden));
          EXPECT_EQ(net->input_width(), n_in);
          EXPECT_EQ(net->padded_output_width(), next16(n_out));
        }
  // Networks without alignment are built as asked (PortableMLP: biases, no padding).
  auto p = create_padded_network(5, 3, {{"otype", "PortableMLP"}, {"n_neurons", 8}, {"n_hidden_layers", 1}});
  EXPECT_EQ(p->n_params(), size_t(8 * 5 + 8 + 3 * 8 + 3));
  EXPECT_EQ(p->name(), "PortableMLP");
}

// The padded network computes the network on the input followed by ones: the same values as the
// aligned network of the next width fed [x, 1, ..., 1], with the same parameters, and its input
// gradient is that network's for the real columns.
TEST(TcnnCompat, PaddedNetworkPadsWithOnes) {
  const json cfg = {{"otype", "FullyFusedMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 2}, {"activation", "Tanh"}};
  const uint32_t n_in = 13, n_out = 5, batch = 7;
  auto padded = create_padded_network(n_in, n_out, cfg, {Device::CPU, DType::F64});
  auto wide = create_network(cfg, 16, n_out, {Device::CPU, DType::F64});
  ASSERT_EQ(padded->n_params(), wide->n_params());
  std::vector<float> init(padded->n_params());
  Pcg32 rng(9);
  padded->initialize_params(rng, init.data());
  std::vector<double> params(init.begin(), init.end()), grads(params.size());
  auto pv = TensorView::vector(params.data(), int64_t(params.size()));
  auto gv = TensorView::vector(grads.data(), int64_t(grads.size()));
  padded->set_params(pv, pv, gv);
  wide->set_params(pv, pv, gv);
  std::vector<double> x(batch * n_in), xw(batch * 16, 1.0), y(batch * 16), yw(batch * 16);
  for (uint32_t b = 0; b < batch; ++b)
    for (uint32_t i = 0; i < n_in; ++i) xw[b * 16 + i] = x[b * n_in + i] = 2 * rng.next_double() - 1;
  padded->inference(TensorView::matrix(x.data(), batch, n_in), TensorView::matrix(y.data(), batch, 16));
  wide->inference(TensorView::matrix(xw.data(), batch, 16), TensorView::matrix(yw.data(), batch, 16));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], yw[i], 1e-14) << i;

  std::vector<double> dy(batch * 16), dx(batch * n_in), dxw(batch * 16);
  for (auto& v : dy) v = 2 * rng.next_double() - 1;
  const TensorView xv = TensorView::matrix(x.data(), batch, n_in), xwv = TensorView::matrix(xw.data(), batch, 16);
  const TensorView dyv = TensorView::matrix(dy.data(), batch, 16);
  const TensorView dxv = TensorView::matrix(dx.data(), batch, n_in), dxwv = TensorView::matrix(dxw.data(), batch, 16);
  auto ctx = padded->forward(xv, nullptr, false, true);
  padded->backward(*ctx, xv, TensorView::matrix(y.data(), batch, 16), dyv, &dxv, false, GradientMode::Overwrite);
  const std::vector<double> padded_grads = grads;
  auto wctx = wide->forward(xwv, nullptr, false, true);
  wide->backward(*wctx, xwv, TensorView::matrix(yw.data(), batch, 16), dyv, &dxwv, false, GradientMode::Overwrite);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_NEAR(padded_grads[i], grads[i], 1e-13) << i;
  for (uint32_t b = 0; b < batch; ++b)
    for (uint32_t i = 0; i < n_in; ++i) EXPECT_NEAR(dx[b * n_in + i], dxw[b * 16 + i], 1e-13);
}

// A network config written for tiny-cuda-nn may name its input width: the unpadded one is the
// padded network (tiny-cuda-nn overwrites the key); any other is still an error.
TEST(TcnnCompat, NetworkInputWidthKeyMayNameTheUnpaddedWidth) {
  json cfg = {{"otype", "FullyFusedMLP"}, {"n_neurons", 16}, {"n_hidden_layers", 1}, {"n_input_dims", 31}};
  EXPECT_EQ(create_padded_network(31, 3, cfg)->n_params(), tcnn_mlp_params(31, 3, 16, 1));
  EXPECT_EQ(create_network_with_input_encoding(31, 3, {{"otype", "Identity"}}, cfg)->n_params(),
            tcnn_mlp_params(31, 3, 16, 1));
  cfg["n_input_dims"] = 30;
  auto e = [&] {
    try {
      create_padded_network(31, 3, cfg);
    } catch (const ConfigError& e) {
      return e;
    }
    ADD_FAILURE() << "expected a ConfigError";
    return ConfigError("", "", "", "");
  }();
  EXPECT_EQ(e.key(), "network.n_input_dims");
  EXPECT_EQ(network_input_alignment({{"otype", "PortableMLP"}}, Device::CPU), 1u);
  EXPECT_EQ(network_input_alignment({{"otype", "CutlassMLP"}, {"n_input_dims", 3}}, Device::CPU), 16u);
}

}  // namespace
