// The CUDA encodings against the CPU FP64 reference (same configs, same inputs widened): Identity,
// Frequency, TriangleWave, OneBlob, SphericalHarmonics, Empty, Composite (Concatenation with every
// padding rule, dims_to_encode_begin with shared and unread dims, Sum, Product, nesting) and NRC;
// forward, inference and input gradients at batches 1, 17, 1000 and 65536, with F32 and F16
// features, every output poisoned (NaN) first so an unwritten element fails. Then strided views,
// the output-dtype rule, a Composite with a Grid part (parameter gradients; runs once the Grid
// kernels are in the build), NetworkWithInputEncoding on CUDA against the parts run one after the
// other (bitwise) and against the CPU, and a training run that follows the CPU trainer.
// Runs on the device machine; skips without a GPU.
//
// Tolerances (the GPU computes in float, the reference in double):
//  * features, F32: |gpu - ref| <= 2e-5 + 1e-5 |ref| per element. The largest float error is
//    Frequency's phase 2^k pi x (k <= 5 here): half an ulp of a phase up to 32 pi plus pi's own
//    rounding, about 7e-6.
//  * features, F16: |gpu - ref| <= 1e-4 + 1e-3 |ref|: the rounding to half is at most 2^-11
//    (4.9e-4) relative, plus the float error above.
//  * input gradients: relative L2 <= 1e-5 over the matrix (F16 runs feed both sides the same
//    half-representable dL/dfeatures, so only float arithmetic differs). TriangleWave's derivative
//    jumps where frac(2^(k-1) x + k/4) is 0 or 1/2; inputs within 1e-3 of such a point (in phase
//    units, 60x the float error of the phase at k <= 7) are redrawn so the comparison measures
//    the kernels, not which side of a jump float rounding lands on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/encodings/grid_math.h"
#include "core/half.h"
#include "core/network_with_input_encoding.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

const BuildOptions kGpu{Device::CUDA};
const BuildOptions kF64{Device::CPU, DType::F64};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kGradTolerance = 1e-5;
constexpr double kTriangleMargin = 1e-3;

double feature_atol(DType t) { return t == DType::F32 ? 2e-5 : 1e-4; }
double feature_rtol(DType t) { return t == DType::F32 ? 1e-5 : 1e-3; }

class EncodingsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// --- host <-> device helpers -------------------------------------------------------------------

struct DevMatrix {
  Buffer buf;
  TensorView view;
};

DevMatrix dev_matrix(int64_t rows, int64_t cols, DType t = DType::F32, double fill = kNaN) {
  DevMatrix m{Buffer(Device::CUDA, std::max<size_t>(static_cast<size_t>(rows * cols) * dtype_size(t), 4)), {}};
  m.view = m.buf.matrix(t, rows, cols);
  fill_tensor(m.view, fill);
  return m;
}

DevMatrix upload(const std::vector<double>& host, int64_t rows, int64_t cols, DType t = DType::F32) {
  DevMatrix m = dev_matrix(rows, cols, t);
  copy_tensor(m.view, TensorView::matrix(const_cast<double*>(host.data()), rows, cols));
  return m;
}

std::vector<double> download(const TensorView& v) {
  std::vector<double> h(static_cast<size_t>(v.rows() * v.cols()));
  copy_tensor(TensorView::matrix(h.data(), v.rows(), v.cols()), v);
  return h;
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Index of the first element outside atol + rtol |ref| (NaN counts), or -1.
int64_t first_mismatch(const std::vector<double>& got, const std::vector<double>& ref, double atol, double rtol) {
  if (got.size() != ref.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= atol + rtol * std::abs(ref[i]))) return static_cast<int64_t>(i);
  return -1;
}

// Uniform in [lo, hi), exactly representable in FP32.
std::vector<double> random_f32(Pcg32& rng, size_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.next_double());
  return v;
}

// As random_f32, rounded further to values FP16 holds exactly when `t` is F16.
std::vector<double> random_values(Pcg32& rng, size_t n, DType t, double lo = -1, double hi = 1) {
  std::vector<double> v = random_f32(rng, n, lo, hi);
  if (t == DType::F16)
    for (auto& x : v) x = half_bits_to_float(float_to_half_bits(static_cast<float>(x)));
  return v;
}

// --- the cases ---------------------------------------------------------------------------------

struct Case {
  std::string name;
  json config;
  uint32_t n_in;
  uint32_t alignment;
  // Input dims read by a TriangleWave of n_frequencies, whose derivative jumps (see the top).
  std::vector<std::pair<uint32_t, uint32_t>> triangle_dims;
};

std::vector<Case> cases() {
  const json nested_concat = {{"otype", "Composite"},
                              {"nested",
                               {{{"otype", "Identity"}, {"n_dims_to_encode", 1}, {"scale", 2.0}},
                                {{"otype", "Frequency"}, {"n_dims_to_encode", 2}, {"n_frequencies", 3}},
                                {{"otype", "Empty"}, {"n_dims_to_encode", 1}},
                                {{"otype", "SphericalHarmonics"}, {"n_dims_to_encode", 3}, {"degree", 3}}}}};
  return {
      {"Identity", {{"otype", "Identity"}, {"scale", 0.5}, {"offset", 0.25}}, 3, 8, {}},
      {"Frequency", {{"otype", "Frequency"}, {"n_frequencies", 6}}, 3, 16, {}},
      {"TriangleWave", {{"otype", "TriangleWave"}, {"n_frequencies", 8}}, 3, 16, {{0, 8}, {1, 8}, {2, 8}}},
      {"OneBlob", {{"otype", "OneBlob"}, {"n_bins", 16}}, 2, 1, {}},
      {"OneBlobPadded", {{"otype", "OneBlob"}, {"n_bins", 8}}, 3, 32, {}},
      // Features written in chunks of 8 (rowwise.cuh): W2's 64 bins (whole, aligned chunks), and 4
      // (one short chunk per input, rows of 12 features padded to 16).
      {"OneBlob64", {{"otype", "OneBlob"}, {"n_bins", 64}}, 2, 1, {}},
      {"OneBlob4Padded", {{"otype", "OneBlob"}, {"n_bins", 4}}, 3, 16, {}},
      // Every degree: each has its own kernels on the GPU.
      {"SphericalHarmonics1", {{"otype", "SphericalHarmonics"}, {"degree", 1}}, 3, 1, {}},
      {"SphericalHarmonics2", {{"otype", "SphericalHarmonics"}, {"degree", 2}}, 3, 8, {}},
      {"SphericalHarmonics3", {{"otype", "SphericalHarmonics"}, {"degree", 3}}, 3, 16, {}},
      {"SphericalHarmonics4", {{"otype", "SphericalHarmonics"}, {"degree", 4}}, 3, 32, {}},
      {"SphericalHarmonics5", {{"otype", "SphericalHarmonics"}, {"degree", 5}}, 3, 1, {}},
      {"SphericalHarmonics6", {{"otype", "SphericalHarmonics"}, {"degree", 6}}, 3, 8, {}},
      {"SphericalHarmonics7", {{"otype", "SphericalHarmonics"}, {"degree", 7}}, 3, 1, {}},
      {"SphericalHarmonics8", {{"otype", "SphericalHarmonics"}, {"degree", 8}}, 3, 1, {}},
      // Identity, Frequency, Empty, then SphericalHarmonics last: the composite's padding goes in
      // front of the harmonics.
      {"CompositeConcat", nested_concat, 7, 16, {}},
      // dims 1-2 read by both parts (their gradients add up), dim 3 by none (gradient 0).
      {"CompositeSharedDims",
       {{"otype", "Composite"},
        {"nested",
         {{{"otype", "OneBlob"}, {"n_bins", 4}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 1}},
          {{"otype", "TriangleWave"}, {"n_frequencies", 4}, {"n_dims_to_encode", 3}, {"dims_to_encode_begin", 0}}}}},
       4, 8, {{0, 4}, {1, 4}, {2, 4}}},
      {"CompositeSum",
       {{"otype", "Composite"},
        {"reduction", "Sum"},
        {"nested",
         {{{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 2}},
          {{"otype", "OneBlob"}, {"n_bins", 4}, {"n_dims_to_encode", 2}}}}},
       4, 16, {}},
      {"CompositeProduct",
       {{"otype", "Composite"},
        {"reduction", "Product"},
        {"nested",
         {{{"otype", "Frequency"}, {"n_frequencies", 1}, {"n_dims_to_encode", 2}},
          {{"otype", "OneBlob"}, {"n_bins", 2}, {"n_dims_to_encode", 2}},
          {{"otype", "Identity"}, {"n_dims_to_encode", 4}, {"dims_to_encode_begin", 0}, {"offset", 0.5}}}}},
       4, 8, {}},
      {"CompositeNested",
       {{"otype", "Composite"},
        {"nested", {{{"otype", "TriangleWave"}, {"n_frequencies", 3}, {"n_dims_to_encode", 1}}, nested_concat}}},
       8, 16, {{0, 3}}},
      {"NRC", {{"otype", "NRC"}, {"n_frequencies", 6}, {"n_bins", 4}}, 9, 16, {{0, 6}, {1, 6}, {2, 6}}},
  };
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " " << c.config.dump(); }

const int64_t kBatches[] = {1, 17, 1000, 65536};

bool near_triangle_jump(double x, uint32_t n_frequencies) {
  for (uint32_t k = 0; k < n_frequencies; ++k) {
    const double v = std::ldexp(x, static_cast<int>(k) - 1) + 0.25 * k;
    const double f = v - std::floor(v);
    for (double jump : {0.0, 0.5, 1.0})
      if (std::abs(f - jump) < kTriangleMargin) return true;
  }
  return false;
}

// Inputs in [0, 1) (the domain of every encoding here), away from TriangleWave's jumps.
std::vector<double> case_inputs(const Case& c, int64_t batch, Pcg32& rng) {
  std::vector<double> x = random_f32(rng, static_cast<size_t>(batch) * c.n_in, 0, 1);
  for (int64_t b = 0; b < batch; ++b)
    for (const auto& [dim, n] : c.triangle_dims) {
      double& v = x[b * c.n_in + dim];
      while (near_triangle_jump(v, n)) v = static_cast<float>(rng.next_double());
    }
  return x;
}

std::unique_ptr<Encoding> make_gpu(const Case& c, DType t) {
  auto e = create_encoding(c.config, c.n_in, kGpu);
  e->set_alignment(c.alignment);
  e->set_output_dtype(t);
  return e;
}

std::unique_ptr<Encoding> make_ref(const Case& c) {
  auto e = create_encoding(c.config, c.n_in, kF64);
  e->set_alignment(c.alignment);
  return e;
}

struct Reference {
  std::vector<double> output, input_grad;
};

Reference reference(Encoding& ref, const std::vector<double>& x, const std::vector<double>& dy, int64_t batch) {
  const uint32_t w = ref.padded_output_width();
  Reference r{std::vector<double>(static_cast<size_t>(batch) * w), std::vector<double>(x.size())};
  std::vector<double> xc = x, dyc = dy;
  auto xv = TensorView::matrix(xc.data(), batch, ref.input_width());
  auto yv = TensorView::matrix(r.output.data(), batch, w);
  auto dxv = TensorView::matrix(r.input_grad.data(), batch, ref.input_width());
  auto ctx = ref.forward(xv, &yv, false, true);
  ref.backward(*ctx, xv, yv, TensorView::matrix(dyc.data(), batch, w), &dxv, false, GradientMode::Overwrite);
  return r;
}

class EncodingVsCpu : public ::testing::TestWithParam<std::tuple<Case, DType>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(EncodingVsCpu, ForwardInferenceAndInputGradients) {
  const auto& [c, t] = GetParam();
  auto gpu = make_gpu(c, t);
  auto ref = make_ref(c);
  ASSERT_EQ(gpu->output_width(), ref->output_width());
  ASSERT_EQ(gpu->padded_output_width(), ref->padded_output_width());
  ASSERT_EQ(gpu->output_dtype(), t);
  ASSERT_EQ(gpu->input_dtype(), DType::F32);
  ASSERT_EQ(gpu->n_params(), 0u);
  const uint32_t w = gpu->padded_output_width();
  Pcg32 rng(42);
  for (int64_t batch : kBatches) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<double> x = case_inputs(c, batch, rng);
    const std::vector<double> dy = random_values(rng, static_cast<size_t>(batch) * w, t);
    const Reference r = reference(*ref, x, dy, batch);

    DevMatrix xd = upload(x, batch, c.n_in);
    DevMatrix inferred = dev_matrix(batch, w, t), forwarded = dev_matrix(batch, w, t);
    gpu->inference(xd.view, inferred.view);
    auto ctx = gpu->forward(xd.view, &forwarded.view, false, true);
    DevMatrix dyd = upload(dy, batch, w, t), dxd = dev_matrix(batch, c.n_in);
    gpu->backward(*ctx, xd.view, forwarded.view, dyd.view, &dxd.view, false, GradientMode::Overwrite);

    for (const auto* out : {&inferred, &forwarded}) {
      const std::vector<double> got = download(out->view);
      const int64_t bad = first_mismatch(got, r.output, feature_atol(t), feature_rtol(t));
      EXPECT_EQ(bad, -1) << (out == &inferred ? "inference" : "forward") << " row " << bad / w << " column " << bad % w
                         << ": " << (bad >= 0 ? got[bad] : 0) << " vs " << (bad >= 0 ? r.output[bad] : 0);
    }
    const double e = rel_l2(download(dxd.view), r.input_grad);
    EXPECT_LE(e, kGradTolerance) << "input gradients";
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllEncodings, EncodingVsCpu, ::testing::Combine(::testing::ValuesIn(cases()), ::testing::Values(DType::F32, DType::F16)),
    [](const auto& info) { return std::get<0>(info.param).name + "_" + to_string(std::get<1>(info.param)); });

// OneBlob's forward at 64 bins evaluates only the bins near an input's kernel and its nearer
// wrapped copy, eight lanes an input (oneblob.cu); other counts each chunk in full. At each count,
// on inputs at the domain's ends, at and beside bin boundaries, within four radii of the ends
// (where the wrapped copy matters), outside [0, 1] and NaN: every feature two bins or more from
// the kernel's copies is exactly 0 on both sides, NaN stays NaN, and the rest agree within the
// feature tolerance.
TEST_F(EncodingsGpu, OneBlobNearBinsEdgesAndOutsideTheDomain) {
  for (uint32_t bins : {2u, 4u, 8u, 16u, 64u, 128u}) {
    SCOPED_TRACE("n_bins " + std::to_string(bins));
    const json config = {{"otype", "OneBlob"}, {"n_bins", bins}};
    std::vector<double> x = {0.0, 1.0, 0.5, -0.3, 1.7, -5.0, 3.0, kNaN, 1e-7, 1.0 - 1e-7, 0.25, 0.75};
    for (uint32_t k = 0; k <= bins; ++k) {
      const double b = static_cast<float>(static_cast<double>(k) / bins);
      for (double d : {0.0, 1e-6, -1e-6, 0.5 / bins, 1.0 / bins, 2.0 / bins, 3.0 / bins})
        if (b + d >= 0 && b + d <= 1) x.push_back(static_cast<float>(b + d));
    }
    Pcg32 rng(bins);
    for (int i = 0; i < 200; ++i) x.push_back(static_cast<float>(rng.next_double() * 4.0 / bins));  // near 0
    for (int i = 0; i < 200; ++i) x.push_back(static_cast<float>(1.0 - rng.next_double() * 4.0 / bins));  // near 1
    const int64_t batch = static_cast<int64_t>(x.size());
    auto ref = create_encoding(config, 1, kF64);
    std::vector<double> want(static_cast<size_t>(batch) * bins);
    std::vector<double> xc = x;
    ref->inference(TensorView::matrix(xc.data(), batch, 1), TensorView::matrix(want.data(), batch, bins));
    for (DType t : {DType::F32, DType::F16}) {
      SCOPED_TRACE(to_string(t));
      auto gpu = create_encoding(config, 1, kGpu);
      gpu->set_output_dtype(t);
      DevMatrix xd = upload(x, batch, 1), y = dev_matrix(batch, bins, t);
      gpu->inference(xd.view, y.view);
      const std::vector<double> got = download(y.view);
      for (size_t i = 0; i < got.size(); ++i) {
        const double r = want[i], xi = x[i / bins];
        const double k = static_cast<double>(i % bins);
        // Two bins or more from every copy of the kernel: each CDF term is exactly 0 or 1 at both
        // of the bin's ends, so the feature is exactly 0 in any precision.
        bool far = true;
        for (double s : {-1.0, 0.0, 1.0}) {
          const double c = (xi - s) * bins;
          far = far && (c <= k - 2 || c >= k + 3);
        }
        if (std::isnan(r)) {
          ASSERT_TRUE(std::isnan(got[i])) << "input " << xi << " bin " << i % bins;
        } else if (far) {
          ASSERT_EQ(r, 0.0) << "input " << xi << " bin " << i % bins;
          ASSERT_EQ(got[i], 0.0) << "input " << xi << " bin " << i % bins;
        } else {
          ASSERT_LE(std::abs(got[i] - r), feature_atol(t) + feature_rtol(t) * std::abs(r))
              << "input " << x[i / bins] << " bin " << i % bins << ": " << got[i] << " vs " << r;
        }
      }
    }
  }
}

// --- views, dtypes, batch 0 --------------------------------------------------------------------

// Input and output as column slices of wider matrices: the encoding reads and writes only its
// columns, and the result equals the dense run's.
TEST_F(EncodingsGpu, StridedViewsReadAndWriteOnlyTheirColumns) {
  for (const Case& c : cases()) {
    if (c.name != "Frequency" && c.name != "CompositeConcat" && c.name != "CompositeSum") continue;
    SCOPED_TRACE(c.name);
    for (DType t : {DType::F32, DType::F16}) {
      auto gpu = make_gpu(c, t);
      const uint32_t w = gpu->padded_output_width();
      const int64_t batch = 300;
      Pcg32 rng(7);
      const std::vector<double> x = case_inputs(c, batch, rng);
      DevMatrix dense_in = upload(x, batch, c.n_in), dense_out = dev_matrix(batch, w, t);
      gpu->inference(dense_in.view, dense_out.view);

      std::vector<double> wide_x(static_cast<size_t>(batch) * (c.n_in + 3), 5.0);
      for (int64_t b = 0; b < batch; ++b)
        for (uint32_t d = 0; d < c.n_in; ++d) wide_x[b * (c.n_in + 3) + 2 + d] = x[b * c.n_in + d];
      DevMatrix wide_in = upload(wide_x, batch, c.n_in + 3), wide_out = dev_matrix(batch, w + 5, t);
      gpu->inference(wide_in.view.cols_slice(2, c.n_in), wide_out.view.cols_slice(3, w));
      const std::vector<double> got = download(wide_out.view), dense = download(dense_out.view);
      for (int64_t b = 0; b < batch; ++b)
        for (uint32_t j = 0; j < w + 5; ++j) {
          const double v = got[b * (w + 5) + j];
          if (j < 3 || j >= w + 3) ASSERT_TRUE(std::isnan(v)) << "column " << j << " outside the view was written";
          else ASSERT_EQ(v, dense[b * w + j - 3]) << "row " << b << " column " << j;
        }
    }
  }
}

TEST_F(EncodingsGpu, OutputDtypeIsF32OrF16) {
  auto e = create_encoding({{"otype", "Frequency"}}, 2, kGpu);
  EXPECT_EQ(e->output_dtype(), DType::F32) << "F32 until told otherwise";
  EXPECT_THROW(e->set_output_dtype(DType::BF16), UnsupportedError);
  EXPECT_THROW(e->set_output_dtype(DType::F64), UnsupportedError);
  e->set_output_dtype(DType::F16);
  EXPECT_EQ(e->output_dtype(), DType::F16);
  // Features of the wrong dtype are a ShapeError naming the argument.
  DevMatrix x = dev_matrix(4, 2, DType::F32, 0.5), y = dev_matrix(4, e->padded_output_width(), DType::F32);
  try {
    e->inference(x.view, y.view);
    FAIL() << "F32 output accepted by an F16 encoding";
  } catch (const ShapeError& err) {
    EXPECT_NE(std::string(err.what()).find("output"), std::string::npos) << err.what();
  }
  // Inputs must be F32 on the device.
  std::vector<float> host(8, 0.5f);
  DevMatrix y16 = dev_matrix(4, e->padded_output_width(), DType::F16);
  EXPECT_THROW(e->inference(TensorView::matrix(host.data(), 4, 2), y16.view), ShapeError);
}

TEST_F(EncodingsGpu, BatchZeroWritesNothingAndDoesNotFail) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto gpu = make_gpu(c, DType::F32);
    DevMatrix x = dev_matrix(0, c.n_in), y = dev_matrix(0, gpu->padded_output_width()), dx = dev_matrix(0, c.n_in);
    gpu->inference(x.view, y.view);
    auto ctx = gpu->forward(x.view, &y.view, false, true);
    gpu->backward(*ctx, x.view, y.view, y.view, &dx.view, false, GradientMode::Overwrite);
    synchronize(Device::CUDA, nullptr);
  }
}

// --- Composite with a Grid part: parameter gradients ------------------------------------------

// A HashGrid and a Frequency side by side, F32, against the CPU FP64 reference with the same
// parameters. Inputs are kept 1e-4 (in grid cells) away from cell boundaries, where float and
// double may pick different cells (the input gradient jumps there; values and parameter gradients
// are continuous). Tolerances: features as above; parameter and input gradients relative L2 1e-5.
TEST_F(EncodingsGpu, CompositeWithGridMatchesCpu) {
  const json grid = {{"otype", "HashGrid"}, {"n_levels", 4},          {"n_features_per_level", 2},
                     {"log2_hashmap_size", 10}, {"base_resolution", 4}, {"per_level_scale", 2.0}};
  json cfg = {{"otype", "Composite"}, {"nested", {grid, {{"otype", "Frequency"}, {"n_frequencies", 2}}}}};
  cfg["nested"][0]["n_dims_to_encode"] = 2;
  std::unique_ptr<Encoding> gpu;
  try {
    gpu = create_encoding(cfg, 3, kGpu);
  } catch (const UnsupportedError& e) {
    GTEST_SKIP() << "Grid on CUDA is not in this build: " << e.what();
  }
  auto ref = create_encoding(cfg, 3, kF64);
  gpu->set_alignment(16);
  ref->set_alignment(16);
  ASSERT_EQ(gpu->n_params(), ref->n_params());
  ASSERT_EQ(gpu->padded_output_width(), ref->padded_output_width());
  const size_t n = gpu->n_params();
  const uint32_t w = gpu->padded_output_width();

  Pcg32 rng(11);
  std::vector<double> params = random_f32(rng, n, -1, 1);
  DevMatrix p = upload(params, 1, static_cast<int64_t>(n)), g = dev_matrix(1, static_cast<int64_t>(n));
  const TensorView pv = p.buf.vector(DType::F32, static_cast<int64_t>(n)), gv = g.buf.vector(DType::F32, static_cast<int64_t>(n));
  gpu->set_params(pv, pv, gv);
  std::vector<double> ref_grads(n, kNaN);
  auto rp = TensorView::vector(params.data(), static_cast<int64_t>(n));
  ref->set_params(rp, rp, TensorView::vector(ref_grads.data(), static_cast<int64_t>(n)));

  for (int64_t batch : {int64_t(1), int64_t(17), int64_t(1000), int64_t(65536)}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<double> x = random_f32(rng, static_cast<size_t>(batch) * 3, 0, 1);
    for (int64_t b = 0; b < batch; ++b)
      for (uint32_t d = 0; d < 2; ++d) {
        double& v = x[b * 3 + d];
        auto near_edge = [&](double u) {
          for (uint32_t l = 0; l < 4; ++l) {
            const double pos = u * grid_level_scale(l, 1.0f, 4) + 0.5;
            const double f = pos - std::floor(pos);
            if (f < 1e-4 || f > 1 - 1e-4) return true;
          }
          return false;
        };
        while (near_edge(v)) v = static_cast<float>(rng.next_double());
      }
    const std::vector<double> dy = random_f32(rng, static_cast<size_t>(batch) * w, -1, 1);
    const Reference r = reference(*ref, x, dy, batch);

    DevMatrix xd = upload(x, batch, 3), y = dev_matrix(batch, w), dyd = upload(dy, batch, w), dx = dev_matrix(batch, 3);
    auto ctx = gpu->forward(xd.view, &y.view, false, true);
    gpu->backward(*ctx, xd.view, y.view, dyd.view, &dx.view, false, GradientMode::Overwrite);
    const std::vector<double> got = download(y.view);
    EXPECT_EQ(first_mismatch(got, r.output, feature_atol(DType::F32), feature_rtol(DType::F32)), -1) << "forward";
    EXPECT_LE(rel_l2(download(dx.view), r.input_grad), kGradTolerance) << "input gradients";
    EXPECT_LE(rel_l2(download(g.view), ref_grads), kGradTolerance) << "parameter gradients";
  }
}

// --- NetworkWithInputEncoding on CUDA ----------------------------------------------------------

const json kFrequency = {{"otype", "Frequency"}, {"n_frequencies", 4}};

json net_config(const std::string& otype) {
  return {{"otype", otype}, {"n_neurons", 64}, {"n_hidden_layers", 2}, {"activation", "Tanh"}, {"output_activation", "None"}};
}

// The network otypes NWIE is checked with; FullyFusedMLP once its CUDA kernels are in the build.
const char* kNetworks[] = {"PortableMLP", "BlasLtMLP", "BlasLtMLPFP16", "FullyFusedMLP"};

std::unique_ptr<Network> gpu_network_or_skip(const std::string& otype, uint32_t n_in, uint32_t n_out) {
  try {
    return create_network(net_config(otype), n_in, n_out, kGpu);
  } catch (const ConfigError& e) {
    if (std::string(e.rule()).find("no CUDA implementation") != std::string::npos) return nullptr;
    throw;
  }
}

class NwieGpu : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// NWIE's forward, inference, input and parameter gradients equal, bit for bit, running the
// encoding (in the network's input dtype, padded to its alignment) and the network one after the
// other with the same parameters: the composition adds no conversion and loses nothing.
TEST_P(NwieGpu, EqualsItsPartsRunInTurn) {
  const std::string otype = GetParam();
  const uint32_t n_in = 3, n_out = 8;  // widths cuBLASLt runs in FP16 (multiples of 8)
  auto probe = gpu_network_or_skip(otype, 16, n_out);
  if (!probe) GTEST_SKIP() << otype << " has no CUDA implementation in this build";
  auto nwie = create_network_with_input_encoding(n_in, n_out, kFrequency, net_config(otype), kGpu);
  auto enc = create_encoding(kFrequency, n_in, kGpu);
  enc->set_alignment(probe->required_input_alignment());
  auto net = create_network(net_config(otype), enc->padded_output_width(), n_out, kGpu);
  enc->set_output_dtype(net->input_dtype());
  ASSERT_EQ(nwie->n_params(), net->n_params() + enc->n_params());
  ASSERT_EQ(nwie->param_dtype(), net->param_dtype());
  ASSERT_EQ(nwie->input_dtype(), DType::F32);
  ASSERT_EQ(nwie->output_dtype(), net->output_dtype());

  // Initial parameters from the model's own initialisation, in its parameter dtype.
  const DType pt = nwie->param_dtype();
  const size_t n = nwie->n_params();
  std::vector<float> init(n);
  Pcg32 init_rng(5);
  nwie->initialize_params(init_rng, init.data(), 1.0f);
  Buffer params(Device::CUDA, n * dtype_size(pt)), grads_a(Device::CUDA, n * dtype_size(pt)),
      grads_b(Device::CUDA, n * dtype_size(pt));
  copy_tensor(params.matrix(pt, 1, static_cast<int64_t>(n)), TensorView::matrix(init.data(), 1, static_cast<int64_t>(n)));
  const TensorView pv = params.vector(pt, static_cast<int64_t>(n));
  nwie->set_params(pv, pv, grads_a.vector(pt, static_cast<int64_t>(n)));
  const TensorView net_p = params.vector(pt, static_cast<int64_t>(net->n_params()));
  net->set_params(net_p, net_p, grads_b.vector(pt, static_cast<int64_t>(net->n_params())));

  const int64_t batch = 1000;
  const uint32_t out_w = nwie->padded_output_width();
  const DType ot = nwie->output_dtype();
  Pcg32 rng(9);
  DevMatrix x = upload(random_f32(rng, batch * n_in, 0, 1), batch, n_in);
  DevMatrix dy = upload(random_values(rng, batch * out_w, ot), batch, out_w, ot);

  DevMatrix y_a = dev_matrix(batch, out_w, ot), inf_a = dev_matrix(batch, out_w, ot), dx_a = dev_matrix(batch, n_in);
  nwie->inference(x.view, inf_a.view);
  auto ctx_a = nwie->forward(x.view, &y_a.view, false, true);
  nwie->backward(*ctx_a, x.view, y_a.view, dy.view, &dx_a.view, false, GradientMode::Overwrite);

  const uint32_t enc_w = enc->padded_output_width();
  DevMatrix features = dev_matrix(batch, enc_w, net->input_dtype()), d_features = dev_matrix(batch, enc_w, net->input_dtype());
  DevMatrix y_b = dev_matrix(batch, out_w, ot), dx_b = dev_matrix(batch, n_in);
  auto enc_ctx = enc->forward(x.view, &features.view, false, true);
  auto net_ctx = net->forward(features.view, &y_b.view, false, true);
  net->backward(*net_ctx, features.view, y_b.view, dy.view, &d_features.view, false, GradientMode::Overwrite);
  enc->backward(*enc_ctx, x.view, features.view, d_features.view, &dx_b.view, false, GradientMode::Overwrite);

  const std::vector<double> ya = download(y_a.view);
  EXPECT_EQ(ya, download(y_b.view)) << "forward";
  EXPECT_EQ(download(inf_a.view), ya) << "inference";
  EXPECT_EQ(download(dx_a.view), download(dx_b.view)) << "input gradients";
  const int64_t n_net = static_cast<int64_t>(net->n_params());
  EXPECT_EQ(download(grads_a.matrix(pt, 1, n_net)), download(grads_b.matrix(pt, 1, n_net))) << "parameter gradients";
  for (double v : ya) ASSERT_TRUE(std::isfinite(v));
}

// NWIE (Frequency + PortableMLP / BlasLtMLP, FP32) against the CPU FP64 NWIE with the same
// parameters: relative L2 <= 1e-5 for outputs, input and parameter gradients (as the networks'
// own suites; Tanh keeps the networks smooth).
TEST_P(NwieGpu, Fp32MatchesCpuReference) {
  const std::string otype = GetParam();
  if (otype != "PortableMLP" && otype != "BlasLtMLP") GTEST_SKIP() << otype << " computes in FP16: see EqualsItsPartsRunInTurn";
  const uint32_t n_in = 3, n_out = 8;  // widths cuBLASLt runs in FP16 (multiples of 8)
  auto gpu = create_network_with_input_encoding(n_in, n_out, kFrequency, net_config(otype), kGpu);
  auto cpu = create_network_with_input_encoding(n_in, n_out, kFrequency, net_config("PortableMLP"), kF64);
  ASSERT_EQ(gpu->n_params(), cpu->n_params());
  const size_t n = gpu->n_params();
  Pcg32 rng(21);
  std::vector<double> params = random_f32(rng, n, -0.3, 0.3);
  DevMatrix p = upload(params, 1, static_cast<int64_t>(n)), g = dev_matrix(1, static_cast<int64_t>(n));
  TensorView pv = p.buf.vector(DType::F32, static_cast<int64_t>(n)), gv = g.buf.vector(DType::F32, static_cast<int64_t>(n));
  gpu->set_params(pv, pv, gv);
  std::vector<double> ref_grads(n, kNaN);
  auto rp = TensorView::vector(params.data(), static_cast<int64_t>(n));
  cpu->set_params(rp, rp, TensorView::vector(ref_grads.data(), static_cast<int64_t>(n)));

  for (int64_t batch : {int64_t(1), int64_t(17), int64_t(1000), int64_t(65536)}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<double> x = random_f32(rng, batch * n_in, 0, 1), dy = random_f32(rng, batch * n_out, -1, 1);
    std::vector<double> y_ref(batch * n_out), dx_ref(batch * n_in);
    auto xv = TensorView::matrix(x.data(), batch, n_in), yv = TensorView::matrix(y_ref.data(), batch, n_out);
    auto dxv = TensorView::matrix(dx_ref.data(), batch, n_in);
    auto ctx = cpu->forward(xv, &yv, false, true);
    cpu->backward(*ctx, xv, yv, TensorView::matrix(dy.data(), batch, n_out), &dxv, false, GradientMode::Overwrite);

    DevMatrix xd = upload(x, batch, n_in), y = dev_matrix(batch, n_out), dyd = upload(dy, batch, n_out), dx = dev_matrix(batch, n_in);
    auto gctx = gpu->forward(xd.view, &y.view, false, true);
    gpu->backward(*gctx, xd.view, y.view, dyd.view, &dx.view, false, GradientMode::Overwrite);
    EXPECT_LE(rel_l2(download(y.view), y_ref), 1e-5) << "output";
    EXPECT_LE(rel_l2(download(dx.view), dx_ref), 1e-5) << "input gradients";
    EXPECT_LE(rel_l2(download(g.view), ref_grads), 1e-5) << "parameter gradients";
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, NwieGpu, ::testing::ValuesIn(kNetworks), [](const auto& info) { return std::string(info.param); });

// NWIE with an F16 network has the encoding write F16 straight into the network's input, and
// a whole model built from the config reads F32 coordinates and writes F16 outputs.
TEST_F(EncodingsGpu, NwieSetsTheEncodingsOutputDtypeFromTheNetwork) {
  auto enc = std::shared_ptr<Encoding>(create_encoding(kFrequency, 2, kGpu));
  auto net = std::shared_ptr<Network>(create_network(net_config("BlasLtMLPFP16"), enc->padded_output_width(), 8, kGpu));
  ASSERT_EQ(enc->output_dtype(), DType::F32);
  auto nwie = make_network_with_input_encoding(enc, net);
  EXPECT_EQ(enc->output_dtype(), DType::F16);
  EXPECT_EQ(nwie->input_dtype(), DType::F32);
  Model m = create_from_config(2, 8,
                               {{"loss", {{"otype", "L2"}}},
                                {"optimizer", {{"otype", "Adam"}}},
                                {"encoding", kFrequency},
                                {"network", net_config("BlasLtMLPFP16")}},
                               kGpu);
  EXPECT_EQ(m.network->input_dtype(), DType::F32);
  EXPECT_EQ(m.network->output_dtype(), DType::F16);
}

// --- training ------------------------------------------------------------------------------------

// 200 Adam steps of Frequency + PortableMLP on the GPU follow the CPU trainer's loss at every step
// within 1e-3 relative (FP32 on both sides; summation order differs), and the loss falls.
TEST_F(EncodingsGpu, NwieTrainingFollowsCpuTrainer) {
  const json cfg = {{"loss", {{"otype", "L2"}}},
                    {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-2}}},
                    {"encoding", {{"otype", "Frequency"}, {"n_frequencies", 4}}},
                    {"network", {{"otype", "PortableMLP"}, {"n_neurons", 32}, {"n_hidden_layers", 2}}}};
  Model gpu = create_from_config(2, 3, cfg, kGpu, 1337);
  Model cpu = create_from_config(2, 3, cfg, {Device::CPU}, 1337);
  ASSERT_EQ(gpu.trainer->params_host(), cpu.trainer->params_host());
  const int64_t batch = 2048;
  Pcg32 rng(3);
  Buffer xin(Device::CUDA, batch * 2 * sizeof(float)), target(Device::CUDA, batch * 3 * sizeof(float));
  std::vector<float> x(batch * 2), y(batch * 3);
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    for (int64_t i = 0; i < batch; ++i) {
      x[2 * i] = rng.next_float();
      x[2 * i + 1] = rng.next_float();
      y[3 * i] = std::sin(6 * x[2 * i]) * std::cos(4 * x[2 * i + 1]);
      y[3 * i + 1] = x[2 * i] * x[2 * i + 1];
      y[3 * i + 2] = std::cos(5 * (x[2 * i] + x[2 * i + 1]));
    }
    copy_tensor(xin.matrix(DType::F32, batch, 2), TensorView::matrix(x.data(), batch, 2));
    copy_tensor(target.matrix(DType::F32, batch, 3), TensorView::matrix(y.data(), batch, 3));
    const float lg = gpu.trainer->training_step(xin.matrix(DType::F32, batch, 2), target.matrix(DType::F32, batch, 3));
    const float lc = cpu.trainer->training_step(TensorView::matrix(x.data(), batch, 2), TensorView::matrix(y.data(), batch, 3));
    ASSERT_NEAR(lg, lc, 1e-3 * std::abs(lc)) << "step " << step;
    if (step == 0) first = lg;
    last = lg;
  }
  EXPECT_LT(last, 0.1f * first) << "the loss falls";
}

}  // namespace
