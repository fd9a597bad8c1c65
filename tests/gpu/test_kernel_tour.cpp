// A tour of every CUDA kernel family, each entry point run once per batch size on small batches
// (and one large batch where a persistent kernel must walk more than one chunk per block).
// The values are checked against the CPU elsewhere (the qualification suites); here every output
// is poisoned first and must come back finite, which catches unwritten elements. The tour's real
// purpose is the compute-sanitizer runs (scripts/gpu/sanitize_each.sh): racecheck, memcheck,
// synccheck and initcheck need minutes for the qualification suites, which repeat each kernel
// hundreds of times; one process per tour case covers every kernel in seconds.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "testing/gpu_stream.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

struct TourCase {
  std::string name;
  uint32_t n_in, n_out;
  json config;  // a whole tiny-cuda-nn config (network, optional encoding, loss, optimizer)
  std::vector<int64_t> batches;
  bool inference_only = false;
};

// gtest prints a parameter with this (its default is a byte dump of the struct).
void PrintTo(const TourCase& c, std::ostream* os) { *os << c.name; }

json mlp(const std::string& otype, uint32_t width, uint32_t hidden, const std::string& act = "ReLU",
         const std::string& out_act = "None") {
  return {{"otype", otype}, {"n_neurons", width}, {"n_hidden_layers", hidden}, {"activation", act},
          {"output_activation", out_act}};
}

json whole(json network, json encoding = nullptr, json loss = {{"otype", "L2"}},
           json optimizer = {{"otype", "Adam"}, {"learning_rate", 1e-3}}) {
  json c = {{"network", std::move(network)}, {"loss", std::move(loss)}, {"optimizer", std::move(optimizer)}};
  if (!encoding.is_null()) c["encoding"] = std::move(encoding);
  return c;
}

json grid(const std::string& otype, bool deterministic) {
  return {{"otype", otype}, {"n_levels", 8}, {"n_features_per_level", 2}, {"log2_hashmap_size", 15},
          {"base_resolution", 8}, {"per_level_scale", 1.5}, {"deterministic", deterministic}};
}

// Small batches cross the row-tile boundaries (1, 17, 257, 1000); 2^17 rows make every block of
// the persistent fused kernels take more than one chunk (stage reuse is where races would hide).
const std::vector<int64_t> kSmall = {1, 17, 257, 1000};
const std::vector<int64_t> kWithLarge = {1, 17, 257, 1000, 131072};

std::vector<TourCase> tour_cases() {
  std::vector<TourCase> c;
  // Networks alone.
  c.push_back({"PortableMLP_64", 64, 64, whole(mlp("PortableMLP", 64, 2)), kSmall});
  c.push_back({"PortableMLP_odd", 3, 5, whole(mlp("PortableMLP", 7, 3, "Tanh", "Sigmoid")), kSmall});
  c.push_back({"BlasLtMLP_64", 64, 64, whole(mlp("BlasLtMLP", 64, 2)), kSmall});
  c.push_back({"BlasLtMLPFP16_64", 64, 64, whole(mlp("BlasLtMLPFP16", 64, 2)), kSmall});
  c.push_back({"BlasLtMLPFP16_128_SiLU", 128, 128, whole(mlp("BlasLtMLPFP16", 128, 2, "SiLU")), kSmall});
  c.push_back({"FullyFused_16_ReLU", 16, 3, whole(mlp("FullyFusedMLP", 16, 1)), kWithLarge});
  c.push_back({"FullyFused_32_LeakyReLU", 32, 7, whole(mlp("FullyFusedMLP", 32, 2, "LeakyReLU", "Sigmoid")), kSmall});
  c.push_back({"FullyFused_64_ReLU", 64, 64, whole(mlp("FullyFusedMLP", 64, 2)), kWithLarge});
  c.push_back({"FullyFused_64_Sine_deep", 32, 3, whole(mlp("FullyFusedMLP", 64, 4, "Sine", "Tanh")), kSmall});
  c.push_back({"FullyFused_128_ReLU", 128, 128, whole(mlp("FullyFusedMLP", 128, 2)), kWithLarge});
  c.push_back({"FullyFused_128_SiLU", 64, 16, whole(mlp("FullyFusedMLP", 128, 3, "SiLU", "Sigmoid")), kSmall});
  {
    json bf16 = mlp("FullyFusedMLP", 64, 2);
    bf16["precision"] = "bf16";
    c.push_back({"FullyFused_64_bf16", 64, 64, whole(bf16), kWithLarge});
  }
  c.push_back({"Width64Fused", 64, 64, whole(mlp("Width64FusedMLP", 64, 2)), kWithLarge, true});
  // Encodings in front of networks (NetworkWithInputEncoding).
  c.push_back({"HashGrid2D_fast", 2, 3, whole(mlp("FullyFusedMLP", 64, 2), grid("HashGrid", false)), kSmall});
  c.push_back({"HashGrid3D_deterministic", 3, 4, whole(mlp("FullyFusedMLP", 64, 2), grid("HashGrid", true)), kSmall});
  c.push_back({"DenseGrid2D", 2, 3, whole(mlp("PortableMLP", 32, 1), grid("DenseGrid", true)), kSmall});
  c.push_back({"TiledGrid3D", 3, 1, whole(mlp("BlasLtMLPFP16", 64, 1), grid("TiledGrid", false)), kSmall});
  c.push_back({"Frequency", 3, 3, whole(mlp("BlasLtMLPFP16", 64, 2), {{"otype", "Frequency"}, {"n_frequencies", 6}}), kSmall});
  c.push_back({"OneBlob", 2, 3, whole(mlp("FullyFusedMLP", 32, 2), {{"otype", "OneBlob"}, {"n_bins", 16}}), kSmall});
  c.push_back({"SphericalHarmonics", 3, 3, whole(mlp("FullyFusedMLP", 64, 1), {{"otype", "SphericalHarmonics"}, {"degree", 4}}), kSmall});
  c.push_back({"TriangleWave", 2, 2, whole(mlp("PortableMLP", 16, 1), {{"otype", "TriangleWave"}, {"n_frequencies", 8}}), kSmall});
  c.push_back({"Composite", 5, 3,
               whole(mlp("FullyFusedMLP", 64, 2),
                     {{"otype", "Composite"},
                      {"nested", {{{"otype", "Frequency"}, {"n_dims_to_encode", 2}, {"n_frequencies", 4}},
                                  {{"otype", "HashGrid"}, {"n_dims_to_encode", 2}, {"n_levels", 4}, {"log2_hashmap_size", 12}},
                                  {{"otype", "Identity"}}}}}),
               kSmall});
  // Every loss (sigmoid outputs: positive values for the relative and cross-entropy losses).
  for (const char* loss : {"L2", "L1", "RelativeL2", "RelativeL2Luminance", "RelativeL1", "MAPE", "SMAPE",
                           "CrossEntropy", "Variance"})
    c.push_back({std::string("Loss_") + loss, 4, 3, whole(mlp("PortableMLP", 16, 1, "ReLU", "Sigmoid"), nullptr, {{"otype", loss}}),
                 {1, 257, 1000}});
  // Every optimizer (FP16 parameters so the master copy and its conversion run too).
  const json adam = {{"otype", "Adam"}, {"learning_rate", 1e-3}};
  const json optimizers[] = {
      adam,
      {{"otype", "SGD"}, {"learning_rate", 1e-2}},
      {{"otype", "EMA"}, {"decay", 0.9}, {"nested", adam}},
      {{"otype", "ExponentialDecay"}, {"decay_start", 1}, {"decay_interval", 1}, {"decay_base", 0.5}, {"nested", adam}},
  };
  for (const json& o : optimizers)
    c.push_back({"Optimizer_" + o["otype"].get<std::string>(), 16, 16, whole(mlp("FullyFusedMLP", 16, 1), nullptr, {{"otype", "L2"}}, o),
                 {1, 257, 1000}});
  return c;
}

std::vector<float> random_host(Pcg32& rng, size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.next_float();
  return v;
}

std::vector<double> to_host(const TensorView& t) {
  std::vector<double> out(t.numel());
  copy_tensor(TensorView::matrix(out.data(), t.rows(), t.cols()), t);
  return out;
}

// Counts the elements a kernel left poisoned (NaN) or made non-finite.
int64_t non_finite(const TensorView& t) {
  int64_t n = 0;
  for (double v : to_host(t)) n += !std::isfinite(v);
  return n;
}

Buffer device_matrix(DType t, int64_t rows, int64_t cols, const std::vector<float>& host, TensorView& view) {
  Buffer b(Device::CUDA, std::max<int64_t>(1, rows * cols) * dtype_size(t));
  view = b.matrix(t, rows, cols);
  if (!host.empty()) copy_tensor(view, TensorView::matrix(const_cast<float*>(host.data()), rows, cols));
  return b;
}

class KernelTour : public ::testing::TestWithParam<TourCase> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// Inference, training forward, backward with input and parameter gradients, and a whole training
// step (loss and optimizer kernels) at each batch size; every output poisoned first.
TEST_P(KernelTour, EveryEntryPointWritesEveryElement) {
  const TourCase& c = GetParam();
  Pcg32 rng(99);
  Model m;
  Buffer params, grads;
  if (c.inference_only) {
    m.network = create_network(c.config["network"], c.n_in, c.n_out, {Device::CUDA});
    const DType t = m.network->param_dtype();
    std::vector<float> init(m.network->n_params());
    m.network->initialize_params(rng, init.data(), 1.0f);
    params = Buffer(Device::CUDA, init.size() * dtype_size(t));
    const TensorView p = params.vector(t, init.size());
    copy_tensor(p, TensorView::vector(init.data(), init.size()));
    m.network->set_params(p, p, TensorView{});
  } else {
    m = create_from_config(c.n_in, c.n_out, c.config, {Device::CUDA}, 7);
  }
  DifferentiableObject& net = *m.network;
  const uint32_t W = net.padded_output_width();

  for (int64_t batch : c.batches) {
    SCOPED_TRACE(c.name + " batch " + std::to_string(batch));
    TensorView x, y, dy, dx, target;
    Buffer xb = device_matrix(net.input_dtype(), batch, c.n_in, random_host(rng, batch * c.n_in, 0.0f, 1.0f), x);
    Buffer yb = device_matrix(net.output_dtype(), batch, W, {}, y);

    fill_tensor(y, NAN);
    net.inference(x, y);
    EXPECT_EQ(non_finite(y), 0) << "inference left elements unwritten or non-finite";
    if (c.inference_only) {
      EXPECT_THROW(net.forward(x, &y), UnsupportedError);
      continue;
    }

    fill_tensor(y, NAN);
    auto ctx = net.forward(x, &y, false, true);
    EXPECT_EQ(non_finite(y), 0) << "forward";
    Buffer dyb = device_matrix(net.output_dtype(), batch, W, random_host(rng, batch * W, -1.0f, 1.0f), dy);
    Buffer dxb = device_matrix(net.input_dtype(), batch, c.n_in, {}, dx);
    fill_tensor(dx, NAN);
    const TensorView g = m.trainer->gradients();
    fill_tensor(g, NAN);
    net.backward(*ctx, x, y, dy, &dx, false, GradientMode::Overwrite);
    EXPECT_EQ(non_finite(dx), 0) << "input gradients";
    EXPECT_EQ(non_finite(g), 0) << "parameter gradients (Overwrite must write every one)";
    net.backward(*ctx, x, y, dy, nullptr, false, GradientMode::Accumulate);
    EXPECT_EQ(non_finite(g), 0) << "accumulated parameter gradients";
    ctx.reset();

    Buffer tb = device_matrix(DType::F32, batch, net.output_width(),
                              random_host(rng, batch * net.output_width(), 0.1f, 0.9f), target);
    for (int step = 0; step < 2; ++step) {
      const float loss = m.trainer->training_step(x, target);
      EXPECT_TRUE(std::isfinite(loss)) << "training step " << step;
    }
    EXPECT_EQ(non_finite(m.trainer->params()), 0) << "parameters after two steps";
  }
  synchronize(Device::CUDA, Stream{});
}

INSTANTIATE_TEST_SUITE_P(All, KernelTour, ::testing::ValuesIn(tour_cases()),
                         [](const ::testing::TestParamInfo<TourCase>& i) { return i.param.name; });

}  // namespace
