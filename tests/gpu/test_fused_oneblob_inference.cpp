// Inference behind OneBlob in one kernel (FusedKernel::WgmmaOneBlob: the Hopper network kernel
// making OneBlob's features in its input stage from the positions, fused/hopper/oneblob_stage.cuh)
// against the two kernels it replaces (OneBlob's kernel writes the features, the network reads
// them), bit for bit, and against the CPU FP64 model within FP16 rounding. Every case: fresh
// random parameters and positions, the domain's ends, bin boundaries, positions outside [0, 1]
// and NaN among them (those rows against the two kernels only), outputs poisoned (NaN) first,
// batches that end mid-tile, a strided input and an output whose rows are not 16-byte aligned.
// Then what keeps the two kernels (the option off, padding, too few bins, too many inputs) and bad
// input. Runs on the device machine; skips without a GPU, and without a compute capability 9.0
// device or sm_90a code in the build.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda/fused/fully_fused_mlp.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
namespace fz = tinyfuse::cuda::fused;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct OneBlobCase {
  std::string name;
  uint32_t dims, bins;
  json network;
  uint32_t n_out;
};

json oneblob(uint32_t bins) { return {{"otype", "OneBlob"}, {"n_bins", bins}}; }

json fully_fused(uint32_t width, uint32_t layers, const char* act = "ReLU", const char* out_act = "None") {
  return {{"otype", "FullyFusedMLP"}, {"n_neurons", width}, {"n_hidden_layers", layers}, {"activation", act},
          {"output_activation", out_act}};
}

std::vector<OneBlobCase> cases() {
  return {
      // W2 (tiny-cuda-nn's config_oneblob.json): two inputs of 64 bins, 128 x 5 -> 3.
      {"W2", 2, 64, fully_fused(128, 5), 3},
      // 64 wide; 32 bins (OneBlob's own kernel evaluates each chunk in full below 57 bins).
      {"Bins32Width64", 2, 32, fully_fused(64, 2), 3},
      // Three inputs of 16 bins: 48 features, under the width (layer 0 in 16-column steps).
      {"ThreeInputs48", 3, 16, fully_fused(64, 3), 4},
      // 128 bins of one input; an output activation (the run-time output epilogue).
      {"Bins128Sigmoid", 1, 128, fully_fused(128, 2, "ReLU", "Sigmoid"), 3},
      // Four inputs (two positions a lane), Tanh hidden layers; outputs wider than 16.
      {"FourInputsTanh", 4, 16, fully_fused(128, 3, "Tanh"), 20},
      // Eight bins, the fewest the kernel takes: 16 features, the narrowest input.
      {"Bins8", 2, 8, fully_fused(64, 1, "LeakyReLU"), 1},
  };
}

bool hopper_here(std::string* why) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    *why = "no device properties";
    return false;
  }
  if (prop.major != 9 || prop.minor != 0) {
    *why = "the kernel runs on compute capability 9.0 only (this GPU is " + std::to_string(prop.major) + "." +
           std::to_string(prop.minor) + ")";
    return false;
  }
  if (!fz::hopper_kernels_built()) {
    *why = "this build holds no sm_90a code (CMAKE_CUDA_ARCHITECTURES without 90)";
    return false;
  }
  return true;
}

class FusedOneBlobInference : public ::testing::TestWithParam<OneBlobCase> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    std::string why;
    if (!hopper_here(&why)) GTEST_SKIP() << "skipped: " << why;
  }
};

BuildOptions gpu_options(bool fused) {
  BuildOptions o{Device::CUDA};
  o.fused_kernels.encoding_inference = fused;
  return o;
}

// (rows x cols) on the device, poisoned with NaN, then holding `host` where given.
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

// `batch` x dims positions: uniform in [0, 1], with, from the first row on, the domain's ends,
// every bin boundary and values beside them, positions within a bin of the ends, outside [0, 1]
// and NaN (as far as the batch holds them). FP32 values.
std::vector<double> positions(Pcg32& rng, int64_t batch, uint32_t dims, uint32_t bins) {
  std::vector<double> special = {0.0, 1.0, 0.5, -0.3, 1.7, -5.0, 3.0, kNaN, 1e-7, 1.0 - 1e-7};
  for (uint32_t k = 0; k <= bins; ++k)
    for (double d : {0.0, 1e-6, -1e-6, 0.5 / bins})
      if (k / double(bins) + d >= 0 && k / double(bins) + d <= 1) special.push_back(k / double(bins) + d);
  std::vector<double> x(static_cast<size_t>(batch * dims));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i < special.size() ? special[i] : rng.next_double();
  for (double& v : x) v = static_cast<float>(v);
  return x;
}

TEST_P(FusedOneBlobInference, EqualsOneBlobThenTheNetworkAndTheCpu) {
  const OneBlobCase& c = GetParam();
  auto fused = create_network_with_input_encoding(c.dims, c.n_out, oneblob(c.bins), c.network, gpu_options(true));
  auto apart = create_network_with_input_encoding(c.dims, c.n_out, oneblob(c.bins), c.network, gpu_options(false));
  auto cpu = create_network_with_input_encoding(c.dims, c.n_out, oneblob(c.bins), c.network,
                                                BuildOptions{Device::CPU, DType::F64});
  ASSERT_EQ(fused->param_dtype(), DType::F16);
  ASSERT_EQ(fused->n_params(), cpu->n_params());

  Pcg32 rng(2000 + c.bins * 3 + c.dims);
  const size_t n = fused->n_params();
  std::vector<double> init(n);
  {
    std::vector<float> f(n);
    fused->initialize_params(rng, f.data(), 1.0f);
    for (size_t i = 0; i < n; ++i) init[i] = f[i];
  }
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
    for (bool strided : {false, true}) {
      if (strided && batch != 1000) continue;
      SCOPED_TRACE("batch " + std::to_string(batch) + (strided ? ", input rows 3 wider, output rows 1 wider" : ""));
      const std::vector<double> x = positions(rng, batch, c.dims, c.bins);
      // The strided input: each row's dims at the start of a row 3 elements wider.
      const uint32_t ld = strided ? c.dims + 3 : c.dims;
      std::vector<double> wide(static_cast<size_t>(batch) * ld, 0.25);
      for (int64_t r = 0; r < batch; ++r)
        for (uint32_t d = 0; d < c.dims; ++d) wide[r * ld + d] = x[r * c.dims + d];
      TensorView xw, yw, ya;
      Buffer xb = device_matrix(batch, ld, DType::F32, xw, &wide);
      const TensorView xv = strided ? xw.cols_slice(0, c.dims) : xw;
      // The strided case's output: rows one element wider (not 16-byte aligned: staged).
      Buffer yfb = device_matrix(batch, out_w + (strided ? 1 : 0), DType::F16, yw);
      Buffer yab = device_matrix(batch, out_w, DType::F16, ya);
      const TensorView yf = strided ? yw.cols_slice(0, out_w) : yw;
      fused->inference(xv, yf);
      EXPECT_EQ(cuda::fused_kernel_used(*fused, fz::FusedPass::EncodedInference), fz::FusedKernel::WgmmaOneBlob);
      apart->inference(xv, ya);
      EXPECT_EQ(cuda::fused_kernel_used(*apart, fz::FusedPass::EncodedInference), fz::FusedKernel::None);
      const std::vector<double> got = download(yf), two_kernels = download(ya);
      ASSERT_EQ(got.size(), two_kernels.size());
      if (strided) {  // the column beside the view keeps its poison
        const std::vector<double> all = download(yw);
        for (int64_t r = 0; r < batch; ++r) ASSERT_TRUE(std::isnan(all[r * (out_w + 1) + out_w])) << "row " << r;
      }
      size_t differ = 0, first = got.size();
      for (size_t i = 0; i < got.size(); ++i) {
        const bool same = got[i] == two_kernels[i] || (std::isnan(got[i]) && std::isnan(two_kernels[i]));
        if (!same && differ++ == 0) first = i;
      }
      EXPECT_EQ(differ, 0u) << "elements unlike the two-kernel path, the first at row " << first / out_w << " column "
                            << first % out_w << ": " << (first < got.size() ? got[first] : 0.0) << " vs "
                            << (first < got.size() ? two_kernels[first] : 0.0) << " (position "
                            << (first < got.size() ? x[first / out_w * c.dims] : 0.0) << ")";

      std::vector<double> ref(static_cast<size_t>(batch * out_w));
      cpu->inference(TensorView::matrix(const_cast<double*>(x.data()), batch, c.dims),
                     TensorView::matrix(ref.data(), batch, out_w));
      double num = 0, den = 0;
      for (int64_t r = 0; r < batch; ++r) {
        bool nan_row = false;
        for (uint32_t d = 0; d < c.dims; ++d) nan_row = nan_row || std::isnan(x[r * c.dims + d]);
        for (uint32_t j = 0; j < c.n_out; ++j) {
          const double gv = got[r * out_w + j], rv = ref[r * out_w + j];
          // A NaN position's features are NaN; what the network makes of them (ReLU takes NaN
          // to 0 on the GPU) is the two-kernel path's, checked above, not the CPU model's.
          if (nan_row) continue;
          ASSERT_TRUE(std::isfinite(gv)) << "row " << r << " column " << j;
          num += (gv - rv) * (gv - rv);
          den += rv * rv;
        }
      }
      // FP16 features and activations, FP32 sums: a few units of FP16 rounding (2^-11) relative.
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 1e-2) << "against the CPU FP64 model";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OneBlobs, FusedOneBlobInference, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

class FusedOneBlobInferenceRules : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// What the kernel does not take runs OneBlob's kernel, then the network (no WgmmaOneBlob), and
// still answers; on a device other than compute capability 9.0 that is every model.
TEST_F(FusedOneBlobInferenceRules, OtherModelsKeepTheTwoKernels) {
  struct Other {
    const char* why;
    uint32_t dims, bins;
    json network;
    BuildOptions options;
  };
  const std::vector<Other> others = {
      {"the option off", 2, 64, fully_fused(128, 5), gpu_options(false)},
      {"padding (24 features for a 32-wide input)", 3, 8, fully_fused(64, 2), gpu_options(true)},
      {"four bins", 4, 4, fully_fused(64, 2), gpu_options(true)},
      {"five inputs", 5, 16, fully_fused(128, 2), gpu_options(true)},
      {"a 32-wide network", 2, 16, fully_fused(32, 2), gpu_options(true)},
  };
  std::string why;
  const bool hopper = hopper_here(&why);
  for (const Other& o : others) {
    SCOPED_TRACE(o.why);
    auto model = create_network_with_input_encoding(o.dims, 3, oneblob(o.bins), o.network, o.options);
    const size_t n = model->n_params();
    std::vector<float> init(n);
    Pcg32 rng(3);
    model->initialize_params(rng, init.data(), 1.0f);
    const DType pt = model->param_dtype();
    Buffer params(Device::CUDA, std::max<size_t>(16, n * dtype_size(pt)));
    copy_tensor(params.matrix(pt, 1, static_cast<int64_t>(n)), TensorView::matrix(init.data(), 1, static_cast<int64_t>(n)));
    const TensorView p = params.vector(pt, static_cast<int64_t>(n));
    model->set_params(p, p, TensorView{});
    std::vector<double> x(static_cast<size_t>(100 * o.dims));
    for (double& v : x) v = static_cast<float>(rng.next_double());
    TensorView xv, yv;
    Buffer xb = device_matrix(100, o.dims, DType::F32, xv, &x);
    Buffer yb = device_matrix(100, model->padded_output_width(), model->output_dtype(), yv);
    model->inference(xv, yv);
    EXPECT_NE(cuda::fused_kernel_used(*model, fz::FusedPass::EncodedInference), fz::FusedKernel::WgmmaOneBlob);
    EXPECT_NE(cuda::fused_kernel_used(*model, fz::FusedPass::Inference), fz::FusedKernel::None);
    for (double v : download(yv)) ASSERT_TRUE(std::isfinite(v));
  }
  // And W2 itself off Hopper.
  if (!hopper) {
    auto model = create_network_with_input_encoding(2, 3, oneblob(64), fully_fused(128, 5), gpu_options(true));
    const size_t n = model->n_params();
    Buffer params(Device::CUDA, n * 2);
    fill_tensor(params.vector(DType::F16, static_cast<int64_t>(n)), 0.01);
    const TensorView p = params.vector(DType::F16, static_cast<int64_t>(n));
    model->set_params(p, p, TensorView{});
    TensorView xv, yv;
    Buffer xb = device_matrix(64, 2, DType::F32, xv), yb = device_matrix(64, 16, DType::F16, yv);
    fill_tensor(xv, 0.5);
    model->inference(xv, yv);
    EXPECT_EQ(cuda::fused_kernel_used(*model, fz::FusedPass::EncodedInference), fz::FusedKernel::None) << why;
  }
}

// Bad input is refused as the two calls would refuse it, before any launch.
TEST_F(FusedOneBlobInferenceRules, BadInputIsRefused) {
  auto model = create_network_with_input_encoding(2, 3, oneblob(64), fully_fused(128, 5), gpu_options(true));
  const size_t n = model->n_params();
  Buffer params(Device::CUDA, n * 2);
  fill_tensor(params.vector(DType::F16, static_cast<int64_t>(n)), 0.01);
  TensorView x2, x3, x2_f16, y, y_f32;
  Buffer a = device_matrix(64, 2, DType::F32, x2), b = device_matrix(64, 3, DType::F32, x3);
  Buffer c = device_matrix(64, 2, DType::F16, x2_f16);
  Buffer d = device_matrix(64, 16, DType::F16, y), e = device_matrix(64, 16, DType::F32, y_f32);
  fill_tensor(x2, 0.5);
  EXPECT_THROW(model->inference(x2, y), Error) << "no parameters";
  const TensorView p = params.vector(DType::F16, static_cast<int64_t>(n));
  model->set_params(p, p, TensorView{});
  EXPECT_THROW(model->inference(x3, y), ShapeError) << "three input columns";
  EXPECT_THROW(model->inference(x2_f16, y), Error) << "F16 positions";
  EXPECT_THROW(model->inference(x2, y_f32), ShapeError) << "F32 output";
  EXPECT_THROW(model->inference(x2, y.rows_slice(0, 32)), ShapeError) << "output rows";
  model->inference(x2.rows_slice(0, 0), y.rows_slice(0, 0));  // an empty batch is fine
  model->inference(x2, y);
  for (double v : download(y)) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
