// The fused grid -> MLP inference (FusedKernel::GeneralGridInput: the FullyFusedMLP kernel that
// evaluates a grid's features as its first layer's input, fused/general/grid_layer0.cuh) against
// the two-kernel path it replaces (the grid's kernel writes the features, the network reads them),
// bit for bit, and against the CPU FP64 model within FP16 rounding. Every case: fresh random
// parameters and positions, outputs poisoned (NaN) first, batches that end mid-tile. Then what
// stays on the two kernels: the option off, four features a level, 1-D and 4-D grids; bad input.
// Runs on the device machine; skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/fused/fully_fused_mlp.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
namespace fz = tinyfuse::cuda::fused;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct GridCase {
  std::string name;
  json encoding, network;
  uint32_t dims, n_out;
};

json hash_grid(uint32_t levels, uint32_t log2_table, double scale, const char* type = "Hash",
               const char* interpolation = "Linear") {
  return {{"otype", "Grid"},  {"type", type}, {"n_levels", levels}, {"n_features_per_level", 2},
          {"log2_hashmap_size", log2_table}, {"base_resolution", 16}, {"per_level_scale", scale},
          {"interpolation", interpolation}};
}

json fully_fused(uint32_t width, uint32_t layers, const char* act = "ReLU", const char* out_act = "None") {
  return {{"otype", "FullyFusedMLP"}, {"n_neurons", width}, {"n_hidden_layers", layers}, {"activation", act},
          {"output_activation", out_act}};
}

std::vector<GridCase> cases() {
  return {
      // W1 (tiny-cuda-nn's config_hash.json): 2-D, 16 levels, 64 x 2 -> 3.
      {"W1Image", hash_grid(16, 15, 1.5), fully_fused(64, 2), 2, 3},
      // W4: 3-D, 16 levels, T = 2^19, 64 x 2 -> 1.
      {"W4Sdf", hash_grid(16, 19, 1.447), fully_fused(64, 2), 3, 1},
      // W3's density network: 64 x 1 -> 16.
      {"W3Density", hash_grid(16, 19, 1.447), fully_fused(64, 1), 3, 16},
      // W4e's Softplus network, and an output activation.
      {"SoftplusSigmoid", hash_grid(16, 17, 1.447), fully_fused(64, 2, "Softplus", "Sigmoid"), 3, 3},
      // 12 levels: 24 features padded to 32 (the last k-step's levels 12-15 are padding).
      {"TwelveLevelsPadded", hash_grid(12, 16, 1.38), fully_fused(64, 3), 3, 4},
      // 8 levels (one k-step), dense and tiled tables, smoothstep, other widths.
      {"DenseSmoothstep", hash_grid(8, 14, 1.5, "Dense", "Smoothstep"), fully_fused(32, 2, "Tanh"), 2, 2},
      {"Tiled128Wide", hash_grid(8, 14, 1.26, "Tiled"), fully_fused(128, 2), 3, 8},
      {"Width16", hash_grid(16, 15, 1.4), fully_fused(16, 4, "SiLU"), 2, 17},
  };
}

class FusedGridInference : public ::testing::TestWithParam<GridCase> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

BuildOptions gpu_options(bool fused) {
  BuildOptions o{Device::CUDA};
  o.fused_kernels.grid_inference = fused;
  return o;
}

std::vector<double> random_uniform(Pcg32& rng, size_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.next_double());
  return v;
}

// (batch x cols) F32 or F16 on the device, from host values or poisoned.
Buffer device_matrix(int64_t rows, int64_t cols, DType t, TensorView& view, const std::vector<double>* host = nullptr) {
  Buffer b(Device::CUDA, std::max<size_t>(4, static_cast<size_t>(rows * cols) * dtype_size(t)));
  view = b.matrix(t, rows, cols);
  fill_tensor(view, kNaN);
  if (host) copy_tensor(view, TensorView::matrix(const_cast<double*>(host->data()), rows, cols));
  return b;
}

std::vector<double> download(const TensorView& v) {
  std::vector<double> h(static_cast<size_t>(v.rows() * v.cols()));
  copy_tensor(TensorView::matrix(h.data(), v.rows(), v.cols()), v);
  return h;
}

TEST_P(FusedGridInference, EqualsTheGridThenTheNetworkAndTheCpu) {
  const GridCase& c = GetParam();
  auto fused = create_network_with_input_encoding(c.dims, c.n_out, c.encoding, c.network, gpu_options(true));
  auto apart = create_network_with_input_encoding(c.dims, c.n_out, c.encoding, c.network, gpu_options(false));
  auto cpu = create_network_with_input_encoding(c.dims, c.n_out, c.encoding, c.network, BuildOptions{Device::CPU, DType::F64});
  ASSERT_EQ(fused->param_dtype(), DType::F16);
  ASSERT_EQ(fused->n_params(), cpu->n_params());

  // Parameters as the model initialises them, the grid's widened to [-0.5, 0.5] so that every
  // level moves the output; rounded to FP16 for all three.
  Pcg32 rng(1000 + c.n_out * 7 + c.dims);
  const size_t n = fused->n_params();
  std::vector<double> init(n);
  {
    std::vector<float> f(n);
    fused->initialize_params(rng, f.data(), 1.0f);
    for (size_t i = 0; i < n; ++i) init[i] = f[i];
  }
  for (const ParamSegment& s : fused->param_segments())
    if (s.kind == ParamSegment::Kind::Grid)
      for (size_t i = s.offset; i < s.offset + s.count; ++i) init[i] = rng.next_double() - 0.5;
  TensorView pv, gv;
  Buffer params = device_matrix(1, static_cast<int64_t>(n), DType::F16, pv, &init);
  Buffer grads = device_matrix(1, static_cast<int64_t>(n), DType::F16, gv);
  const TensorView p = params.vector(DType::F16, static_cast<int64_t>(n)), g = grads.vector(DType::F16, static_cast<int64_t>(n));
  fused->set_params(p, p, g);
  apart->set_params(p, p, g);
  const std::vector<double> rounded = download(pv);
  std::vector<double> ref_grads(n, kNaN);
  const auto rp = TensorView::vector(const_cast<double*>(rounded.data()), static_cast<int64_t>(n));
  cpu->set_params(rp, rp, TensorView::vector(ref_grads.data(), static_cast<int64_t>(n)));

  const uint32_t out_w = fused->padded_output_width();
  for (int64_t batch : {int64_t(1), int64_t(17), int64_t(1000), int64_t(65536 + 13)}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<double> x = random_uniform(rng, static_cast<size_t>(batch * c.dims), 0, 1);
    TensorView xv, yf, ya;
    Buffer xb = device_matrix(batch, c.dims, DType::F32, xv, &x);
    Buffer yfb = device_matrix(batch, out_w, DType::F16, yf), yab = device_matrix(batch, out_w, DType::F16, ya);
    fused->inference(xv, yf);
    EXPECT_EQ(cuda::fused_kernel_used(*fused, fz::FusedPass::Inference), fz::FusedKernel::GeneralGridInput);
    apart->inference(xv, ya);
    EXPECT_NE(cuda::fused_kernel_used(*apart, fz::FusedPass::Inference), fz::FusedKernel::GeneralGridInput);
    const std::vector<double> got = download(yf), two_kernels = download(ya);
    ASSERT_EQ(got.size(), two_kernels.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == two_kernels[i]);  // NaN differs
    EXPECT_EQ(differ, 0u) << "elements unlike the two-kernel path";

    std::vector<double> ref(static_cast<size_t>(batch * out_w));
    cpu->inference(TensorView::matrix(const_cast<double*>(x.data()), batch, c.dims),
                   TensorView::matrix(ref.data(), batch, out_w));
    double num = 0, den = 0;
    for (int64_t r = 0; r < batch; ++r)
      for (uint32_t j = 0; j < c.n_out; ++j) {
        const double d = got[r * out_w + j] - ref[r * out_w + j];
        num += d * d;
        den += ref[r * out_w + j] * ref[r * out_w + j];
      }
    // FP16 features and activations, FP32 sums: a few units of FP16 rounding (2^-11) relative.
    EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 1e-2) << "against the CPU FP64 model";
  }
}

INSTANTIATE_TEST_SUITE_P(Grids, FusedGridInference, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

class FusedGridInferenceRules : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// What the kernel does not take runs the grid's kernel, then the network (no GeneralGridInput),
// and still answers.
TEST_F(FusedGridInferenceRules, OtherGridsAndNetworksKeepTheTwoKernels) {
  struct Other {
    const char* why;
    json encoding, network;
    uint32_t dims;
    BuildOptions options;
  };
  json four = hash_grid(8, 14, 1.5);
  four["n_features_per_level"] = 4;
  const std::vector<Other> others = {
      {"the option off", hash_grid(16, 15, 1.5), fully_fused(64, 2), 2, gpu_options(false)},
      {"four features a level", four, fully_fused(64, 2), 3, gpu_options(true)},
      {"a 1-D grid", hash_grid(8, 14, 1.5), fully_fused(64, 2), 1, gpu_options(true)},
      {"a 4-D grid", hash_grid(8, 14, 1.5), fully_fused(64, 2), 4, gpu_options(true)},
  };
  for (const Other& o : others) {
    SCOPED_TRACE(o.why);
    auto model = create_network_with_input_encoding(o.dims, 3, o.encoding, o.network, o.options);
    const size_t n = model->n_params();
    std::vector<float> init(n);
    Pcg32 rng(3);
    model->initialize_params(rng, init.data(), 1.0f);
    const DType pt = model->param_dtype();
    Buffer params(Device::CUDA, n * dtype_size(pt));
    copy_tensor(params.matrix(pt, 1, static_cast<int64_t>(n)), TensorView::matrix(init.data(), 1, static_cast<int64_t>(n)));
    const TensorView p = params.vector(pt, static_cast<int64_t>(n));
    model->set_params(p, p, TensorView{});
    const std::vector<double> x = random_uniform(rng, 100 * o.dims, 0, 1);
    TensorView xv, yv;
    Buffer xb = device_matrix(100, o.dims, DType::F32, xv, &x);
    Buffer yb = device_matrix(100, model->padded_output_width(), model->output_dtype(), yv);
    model->inference(xv, yv);
    EXPECT_NE(cuda::fused_kernel_used(*model, fz::FusedPass::Inference), fz::FusedKernel::GeneralGridInput);
    for (double v : download(yv)) ASSERT_TRUE(std::isfinite(v));
  }
}

// Bad input is refused as the two calls would refuse it, before any launch.
TEST_F(FusedGridInferenceRules, BadInputIsRefused) {
  auto model = create_network_with_input_encoding(3, 1, hash_grid(16, 15, 1.447), fully_fused(64, 2), gpu_options(true));
  const size_t n = model->n_params();
  Buffer params(Device::CUDA, n * 2);
  fill_tensor(params.vector(DType::F16, static_cast<int64_t>(n)), 0.01);
  TensorView x3, x2, y, y_f32;
  Buffer a = device_matrix(64, 3, DType::F32, x3), b = device_matrix(64, 2, DType::F32, x2);
  Buffer c = device_matrix(64, 16, DType::F16, y), d = device_matrix(64, 16, DType::F32, y_f32);
  fill_tensor(x3, 0.5);
  EXPECT_THROW(model->inference(x3, y), Error) << "no parameters";
  const TensorView p = params.vector(DType::F16, static_cast<int64_t>(n));
  model->set_params(p, p, TensorView{});
  EXPECT_THROW(model->inference(x2, y), ShapeError) << "two input columns";
  EXPECT_THROW(model->inference(x3, y_f32), ShapeError) << "F32 output";
  EXPECT_THROW(model->inference(x3, y.rows_slice(0, 32)), ShapeError) << "output rows";
  model->inference(x3.rows_slice(0, 0), y.rows_slice(0, 0));  // an empty batch is fine
  model->inference(x3, y);
  for (double v : download(y)) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
