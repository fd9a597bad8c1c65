// The CUDA Grid encoding against the CPU FP64 reference: Hash / Dense / Tiled, 1-4 dims, 1/2/4/8
// features, Nearest / Linear / Smoothstep, FP32 and FP16 parameters and outputs, batches 1, 17,
// 1000 and 65536; forward, input gradients, parameter gradients in both backward modes (fast
// float atomics and deterministic fixed point) and the second-order pass. Every output is
// poisoned (NaN) first so an unwritten element fails. Both sides get the same parameters, inputs
// and dL/doutput (values exactly representable in the GPU's dtypes). Skips without a GPU.
//
// Inputs are drawn so that at every level the FP32 position (fmaf, as the kernels compute it) and
// the FP64 one fall in the same cell, at least 1e-4 from its faces: otherwise a record whose
// rounding crosses a face gets other vertices (Nearest) or another cell's derivative, an O(1)
// difference that says nothing about the kernels.
//
// Tolerances (relative L2 error per output matrix, per input-gradient matrix and per level's
// parameter-gradient segment):
// - FP32 features and outputs, 2e-5: positions rounded to FP32 move a weight by up to
//   max_scale * 2^-24 (< 2e-6 at the test scales <= 23), plus FP32 rounding of 2^D-term sums.
// - FP32 parameter gradients, 1e-4: the sums have up to batch * 2^D terms per entry (2^20 at
//   batch 65536, 4 dims); FP32 summation in any order drifts like sqrt(n) * 2^-24 (~6e-5 there).
// - Anything the GPU stores in FP16 (outputs, second-order dL/doutput, gradients of FP16
//   parameters), 2e-3: one FP16 rounding (2^-11 relative at worst, ~3e-4 RMS) on top of the
//   above. FP16 parameters and dL/doutput are exact on both sides (the reference gets the same
//   rounded values), so dL/dinput (FP32) keeps the FP32 tolerance.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/encodings/grid_config.h"
#include "core/half.h"
#include "cuda/encodings/grid_encoding.h"
#include "testing/gpu_stream.h"
#include "testing/graph_capture.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

const BuildOptions kF64{Device::CPU, DType::F64};

class GridGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// ---- host <-> device ----

struct Dev {
  Buffer buf;
  TensorView view;
};

Dev dev_matrix(DType dtype, int64_t rows, int64_t cols, double fill = NAN) {
  Dev m{Buffer(Device::CUDA, std::max<size_t>(static_cast<size_t>(rows * cols) * dtype_size(dtype), 16)), {}};
  m.view = m.buf.matrix(dtype, rows, cols);
  if (rows * cols > 0) fill_tensor(m.view, fill);
  return m;
}

Dev upload(const std::vector<double>& host, DType dtype, int64_t rows, int64_t cols) {
  Dev m = dev_matrix(dtype, rows, cols);
  if (rows * cols > 0) copy_tensor(m.view, TensorView::matrix(const_cast<double*>(host.data()), rows, cols));
  return m;
}

std::vector<double> download(const TensorView& v) {
  std::vector<double> h(static_cast<size_t>(v.rows() * v.cols()));
  if (!h.empty()) copy_tensor(TensorView::matrix(h.data(), v.rows(), v.cols()), v);
  return h;
}

double quantize(double x, DType dtype) {
  const float f = static_cast<float>(x);
  return dtype == DType::F16 ? half_bits_to_float(float_to_half_bits(f)) : f;
}

std::vector<double> random_values(Pcg32& rng, size_t n, DType dtype, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) x = quantize(lo + (hi - lo) * rng.next_double(), dtype);
  return v;
}

// ||a - b|| / ||b|| (||a - b|| when b is zero); NaN in a gives NaN, which fails.
double rel_l2(const double* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}
double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  return rel_l2(a.data(), b.data(), std::min(a.size(), b.size()));
}

// Largest relative error over the encoding's level segments.
double worst_segment_error(const Encoding& enc, const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (const ParamSegment& s : enc.param_segments()) {
    const double e = rel_l2(a.data() + s.offset, b.data() + s.offset, s.count);
    worst = std::isnan(e) ? e : std::max(worst, e);
    if (std::isnan(worst)) break;
  }
  return worst;
}

// enc's FP32 parameter gradients from one forward on x and a backward of dL/doutput dy
// (overwritten), at the FP32 parameters `params`.
std::vector<double> fp32_param_gradients(Encoding& enc, const Dev& params, const Dev& x, const Dev& dy) {
  const int64_t n = static_cast<int64_t>(enc.n_params());
  Dev g = dev_matrix(DType::F32, 1, n);
  const TensorView pvec = TensorView::vector(params.view.data, DType::F32, Device::CUDA, n);
  enc.set_params(pvec, pvec, TensorView::vector(g.view.data, DType::F32, Device::CUDA, n));
  auto ctx = enc.forward(x.view, nullptr);
  enc.backward(*ctx, x.view, dy.view, dy.view, nullptr, false, GradientMode::Overwrite);
  return download(g.view);
}

// How many of `grads` are NaN inside level `level`'s parameter segment, and how many outside it.
std::pair<size_t, size_t> nans_inside_and_outside_level(const Encoding& enc, const std::vector<double>& grads,
                                                        size_t level) {
  const ParamSegment seg = enc.param_segments().at(level);
  std::pair<size_t, size_t> nans{0, 0};
  for (size_t i = 0; i < grads.size(); ++i)
    (i >= seg.offset && i < seg.offset + seg.count ? nans.first : nans.second) += std::isnan(grads[i]);
  return nans;
}

// W1's grid: tiny-cuda-nn's image sample (16 levels of up to 2^15 entries, base 16, scale 1.5).
json image_grid_config() {
  return {{"otype", "HashGrid"}, {"n_levels", 16}, {"n_features_per_level", 2}, {"log2_hashmap_size", 15},
          {"base_resolution", 16}, {"per_level_scale", 1.5}};
}

// Inputs in [0, 1), exact in FP32, whose FP32 and FP64 positions share a cell at every level,
// at least `margin` from its faces.
std::vector<double> inputs_inside_cells(const GridSpec& spec, Pcg32& rng, int64_t batch, double margin = 1e-4) {
  std::vector<double> x(static_cast<size_t>(batch) * spec.n_dims);
  for (auto& xi : x) {
    for (;;) {
      const float xf = rng.next_float();
      bool ok = true;
      for (float s : spec.level_scale) {
        const double pd = double(s) * double(xf) + 0.5;
        const float pf = std::fma(s, xf, 0.5f);
        const double frac = pd - std::floor(pd);
        ok = ok && std::floor(pd) == std::floor(double(pf)) && frac > margin && frac < 1 - margin;
      }
      if (ok) {
        xi = xf;
        break;
      }
    }
  }
  return x;
}

struct Case {
  std::string type = "Hash", interp = "Linear", hash = "CoherentPrime";
  uint32_t dims = 2, features = 2, levels = 4, log2_size = 6, base = 4;
  float per_level_scale = 1.8f;
  bool stochastic = false;
  json config(bool deterministic) const {
    return {{"otype", "Grid"}, {"type", type}, {"n_levels", levels}, {"n_features_per_level", features},
            {"log2_hashmap_size", log2_size}, {"base_resolution", base}, {"per_level_scale", per_level_scale},
            {"interpolation", interp}, {"hash", hash}, {"stochastic_interpolation", stochastic},
            {"deterministic", deterministic}};
  }
  std::string describe() const { return config(false).dump() + " dims " + std::to_string(dims); }
};

std::unique_ptr<Encoding> make_gpu(const Case& c, bool deterministic, DType pdt, DType odt) {
  return cuda::make_grid_encoding(parse_grid_config(c.config(deterministic), "encoding", c.dims), pdt, odt);
}

double tol_values(DType t) { return t == DType::F16 ? 2e-3 : 2e-5; }
double tol_params(DType t) { return t == DType::F16 ? 2e-3 : 1e-4; }

// Runs one case at one batch with parameters of `pdt` and outputs of `odt` on both GPU modes,
// comparing everything with the CPU FP64 reference, each within its tolerance or `position_tol`,
// whichever is larger (fine grids: see GroupedContributionsWhereTheSumsOutgrowL2).
void check_case(const Case& c, int64_t batch, DType pdt, DType odt, uint32_t alignment, uint64_t seed,
                double position_tol = 0) {
  const std::string what = c.describe() + " batch " + std::to_string(batch) + " params " + to_string(pdt) +
                           " output " + to_string(odt);
  SCOPED_TRACE(what);
  Pcg32 rng(seed);
  auto ref = create_encoding(c.config(false), c.dims, kF64);
  auto fast = make_gpu(c, false, pdt, odt), det = make_gpu(c, true, pdt, odt);
  for (Encoding* e : {ref.get(), fast.get(), det.get()}) e->set_alignment(alignment);
  const size_t n = ref->n_params();
  ASSERT_EQ(fast->n_params(), n);
  const uint32_t W = ref->padded_output_width(), D = c.dims;
  ASSERT_EQ(fast->padded_output_width(), W);
  const GridSpec spec = parse_grid_config(c.config(false), "encoding", c.dims);

  // Shared data: parameters +-1 (so values and gradients are O(1)), inputs, dL/doutput and
  // v = dL2/d(dL/dinput); padding columns of dL/doutput are nonzero and must be ignored.
  std::vector<double> params = random_values(rng, n, pdt);
  std::vector<double> x = inputs_inside_cells(spec, rng, batch);
  std::vector<double> dy = random_values(rng, size_t(batch) * W, odt), v = random_values(rng, size_t(batch) * D, DType::F32);
  std::vector<double> ref_grads(n, NAN), ref_y(size_t(batch) * W), ref_dx(size_t(batch) * D), ref_ddy(size_t(batch) * W),
      ref_d2x(size_t(batch) * D);
  auto pv = TensorView::vector(params.data(), n);
  ref->set_params(pv, pv, TensorView::vector(ref_grads.data(), n));
  auto xv = TensorView::matrix(x.data(), batch, D), yv = TensorView::matrix(ref_y.data(), batch, W);
  auto dyv = TensorView::matrix(dy.data(), batch, W), dxv = TensorView::matrix(ref_dx.data(), batch, D);
  auto vv = TensorView::matrix(v.data(), batch, D), ddyv = TensorView::matrix(ref_ddy.data(), batch, W);
  auto ctx = ref->forward(xv, &yv);
  ref->backward(*ctx, xv, yv, dyv, &dxv, false, GradientMode::Overwrite);
  const std::vector<double> ref_param_grads = ref_grads;
  auto d2xv = TensorView::matrix(ref_d2x.data(), batch, D);
  ref->backward_backward_input(*ctx, xv, vv, dyv, &ddyv, &d2xv, false, GradientMode::Overwrite);
  const std::vector<double> ref_second_grads = ref_grads;
  // The composed model's encoding half: the second order at dy plus the first order at eps.
  std::vector<double> eps = random_values(rng, size_t(batch) * W, odt), ref_both_d2x(size_t(batch) * D);
  auto epsv = TensorView::matrix(eps.data(), batch, W), both_d2xv = TensorView::matrix(ref_both_d2x.data(), batch, D);
  ref->backward_backward_input_and_backward(*ctx, xv, yv, vv, dyv, epsv, &both_d2xv, false, GradientMode::Overwrite);
  const std::vector<double> ref_both_grads = ref_grads;
  std::vector<double> ref_first_plus_both(n);
  for (size_t i = 0; i < n; ++i) ref_first_plus_both[i] = ref_param_grads[i] + ref_both_grads[i];

  Dev p = upload(params, pdt, 1, int64_t(n));
  Dev gx = upload(x, DType::F32, batch, D), gdy = upload(dy, odt, batch, W), gv = upload(v, DType::F32, batch, D),
      geps = upload(eps, odt, batch, W);
  const TensorView pvec = TensorView::vector(p.view.data, pdt, Device::CUDA, int64_t(n));

  std::vector<std::vector<double>> det_runs;
  for (Encoding* enc : {fast.get(), det.get()}) {
    const bool is_det = enc == det.get();
    SCOPED_TRACE(is_det ? "deterministic" : "fast");
    for (int run = 0; run < (is_det ? 2 : 1); ++run) {
      Dev grads = dev_matrix(pdt, 1, int64_t(n));
      enc->set_params(pvec, pvec, TensorView::vector(grads.view.data, pdt, Device::CUDA, int64_t(n)));
      Dev y = dev_matrix(odt, batch, W), dx = dev_matrix(DType::F32, batch, D), ddy = dev_matrix(odt, batch, W),
          d2x = dev_matrix(DType::F32, batch, D);
      auto gctx = enc->forward(gx.view, &y.view);
      enc->backward(*gctx, gx.view, y.view, gdy.view, &dx.view, false, GradientMode::Overwrite);
      const auto first = download(grads.view);
      fill_tensor(grads.view, NAN);
      enc->backward_backward_input(*gctx, gx.view, gv.view, gdy.view, &ddy.view, &d2x.view, false, GradientMode::Overwrite);
      const auto second = download(grads.view);
      fill_tensor(grads.view, NAN);
      Dev both_d2x = dev_matrix(DType::F32, batch, D);
      enc->backward_backward_input_and_backward(*gctx, gx.view, y.view, gv.view, gdy.view, geps.view, &both_d2x.view,
                                                false, GradientMode::Overwrite);
      const auto both = download(grads.view);
      // Added onto the first order's gradients, without dL2/dinput.
      enc->backward(*gctx, gx.view, y.view, gdy.view, nullptr, false, GradientMode::Overwrite);
      enc->backward_backward_input_and_backward(*gctx, gx.view, y.view, gv.view, gdy.view, geps.view, nullptr, false,
                                                GradientMode::Accumulate);
      const auto first_plus_both = download(grads.view);
      if (run == 0) {
        const double values_tol = std::max(tol_values(odt), position_tol),
                     f32_tol = std::max(tol_values(DType::F32), position_tol),
                     params_tol = std::max(tol_params(pdt), position_tol);
        EXPECT_LE(rel_l2(download(y.view), ref_y), values_tol) << "forward";
        EXPECT_LE(rel_l2(download(dx.view), ref_dx), f32_tol) << "dL/dinput";
        EXPECT_LE(worst_segment_error(*enc, first, ref_param_grads), params_tol) << "parameter gradients";
        EXPECT_LE(worst_segment_error(*enc, second, ref_second_grads), params_tol) << "second-order parameter gradients";
        EXPECT_LE(rel_l2(download(ddy.view), ref_ddy), values_tol) << "second-order dL/doutput";
        EXPECT_LE(rel_l2(download(d2x.view), ref_d2x), f32_tol) << "second-order dL/dinput";
        EXPECT_LE(worst_segment_error(*enc, both, ref_both_grads), params_tol) << "both orders' parameter gradients";
        EXPECT_LE(rel_l2(download(both_d2x.view), ref_both_d2x), f32_tol) << "both orders' dL2/dinput";
        EXPECT_LE(worst_segment_error(*enc, first_plus_both, ref_first_plus_both), params_tol)
            << "both orders added onto the first order's gradients";
      }
      if (is_det) {
        std::vector<double> all = first;
        for (const auto* part : {&second, &both, &first_plus_both}) all.insert(all.end(), part->begin(), part->end());
        det_runs.push_back(std::move(all));
      }
    }
  }
  ASSERT_EQ(det_runs.size(), 2u);
  EXPECT_EQ(std::memcmp(det_runs[0].data(), det_runs[1].data(), det_runs[0].size() * sizeof(double)), 0)
      << "deterministic mode: two runs differ";
}

// ---- The matrix of cases ----

class GridGpuCases : public ::testing::TestWithParam<std::tuple<std::string, uint32_t, std::string, uint32_t>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(GridGpuCases, MatchCpuFp64) {
  const auto& [type, dims, interp, features] = GetParam();
  Case c;
  c.type = type, c.dims = dims, c.interp = interp, c.features = features;
  const char* hashes[] = {"CoherentPrime", "Prime", "ReversedPrime", "BaseConvert", "Rng"};
  c.hash = hashes[(dims + features + interp.size()) % 5];
  // Small tables: Hash levels beyond the first are hashed, Tiled (base 3) ones wrap.
  c.base = type == "Tiled" ? 3 : 4, c.log2_size = 3 * dims;
  uint64_t seed = 1000 * dims + 10 * features + type.size() + interp.size();
  for (int64_t batch : {1, 17, 1000, 65536})
    for (DType dt : {DType::F32, DType::F16}) {
      const uint32_t alignment = batch == 17 ? 16 : 1;  // padding columns in some runs
      check_case(c, batch, dt, dt, alignment, seed++);
    }
}

INSTANTIATE_TEST_SUITE_P(TypesDimsInterpolationsFeatures, GridGpuCases,
                         ::testing::Combine(::testing::Values("Hash", "Dense", "Tiled"), ::testing::Values(1u, 2u, 3u, 4u),
                                            ::testing::Values("Linear", "Smoothstep", "Nearest"),
                                            ::testing::Values(1u, 2u, 4u, 8u)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "d_" +
                                  std::get<2>(info.param) + "_f" + std::to_string(std::get<3>(info.param));
                         });

TEST_F(GridGpu, MixedParameterAndOutputDtypes) {
  Case c;
  c.dims = 3, c.features = 4;
  check_case(c, 1000, DType::F32, DType::F16, 8, 71);
  check_case(c, 1000, DType::F16, DType::F32, 8, 72);
}

TEST_F(GridGpu, StochasticInterpolationChoosesTheCpuCorner) {
  Case c;
  c.dims = 2, c.features = 2, c.stochastic = true;
  check_case(c, 1000, DType::F32, DType::F32, 1, 73);
}

// W1's grid (tiny-cuda-nn's image sample: 2-D, 16 levels of up to 2^15 entries, base 16, scale
// 1.5) at its batch of 2^18, and the same in 3-D (W4's coarse levels): entries receive 32 to 3,600
// contributions, summed by the fast path's shared-memory levels (fixed point per block on CUDA)
// and paired vector atomics. The fast sums against the deterministic fixed-point ones (the same
// corner weights: the positions are the GPU's on both sides), per level, within FP32 summation
// error (sqrt(3,600) * 2^-24 ~ 4e-6), with dL/doutput scaled by 1 and by 2^-100 and 2^100 (the
// ends of the block scales' range).
TEST_F(GridGpu, FastSumsMatchDeterministicAtImageScale) {
  for (uint32_t dims : {2u, 3u}) {
    const json cfg = image_grid_config();
    const int64_t batch = int64_t(1) << 18;
    Pcg32 rng(91 + dims);
    json det_cfg = cfg;
    det_cfg["deterministic"] = true;
    auto fast = cuda::make_grid_encoding(parse_grid_config(cfg, "encoding", dims));
    auto det = cuda::make_grid_encoding(parse_grid_config(det_cfg, "encoding", dims));
    const size_t n = fast->n_params();
    const uint32_t W = fast->padded_output_width();
    std::vector<double> x(size_t(batch) * dims);
    for (auto& xi : x) xi = rng.next_float();
    Dev p = upload(random_values(rng, n, DType::F32), DType::F32, 1, int64_t(n));
    Dev gx = upload(x, DType::F32, batch, dims);
    const std::vector<double> dy = random_values(rng, size_t(batch) * W, DType::F32);
    for (double scale : {1.0, std::ldexp(1.0, -100), std::ldexp(1.0, 100)}) {
      std::vector<double> scaled(dy);
      for (auto& v : scaled) v *= scale;
      Dev gdy = upload(scaled, DType::F32, batch, W);
      EXPECT_LE(worst_segment_error(*fast, fp32_param_gradients(*fast, p, gx, gdy), fp32_param_gradients(*det, p, gx, gdy)),
                1e-5)
          << dims << "-D, dL/doutput x " << scale;
    }
  }
}

// Shared-memory levels beside the contribution kernel (a programmatic dependent launch on sm_90):
// what follows on the stream, here the FP16 conversion of the sums, must see both finished. Four
// coarse levels with thousands of contributions per entry go through shared_level_kernel, the
// fifth (82 x 82 entries, over 48 KiB of sums) through the contribution kernel alone, which so
// finishes long before the shared levels; a conversion that waited for it alone would read partial
// sums, off by O(1). Several backwards into poisoned gradients, each against the deterministic
// sums, within FP16 rounding; then one captured in a CUDA graph on a stream of the caller's (where
// the dependent launch becomes a graph edge) and replayed.
TEST_F(GridGpu, SharedLevelsFinishBeforeTheFp16Conversion) {
  const tinyfuse::testing::OwnedStream stream;  // outlives the encodings and buffers freed on it
  Case c;
  c.levels = 5, c.log2_size = 14, c.base = 16, c.per_level_scale = 1.5f;
  auto fast = make_gpu(c, false, DType::F16, DType::F16), det = make_gpu(c, true, DType::F16, DType::F16);
  const size_t n = fast->n_params();
  const int64_t batch = int64_t(1) << 18;
  const uint32_t W = fast->padded_output_width();
  Pcg32 rng(93);
  std::vector<double> x(size_t(batch) * 2);
  for (auto& xi : x) xi = rng.next_float();
  Dev p = upload(random_values(rng, n, DType::F16), DType::F16, 1, int64_t(n));
  Dev gx = upload(x, DType::F32, batch, 2);
  const auto pvec = TensorView::vector(p.view.data, DType::F16, Device::CUDA, int64_t(n));
  auto gradients = [&](Encoding& enc, const Dev& dy) {
    Dev g = dev_matrix(DType::F16, 1, int64_t(n));
    fill_tensor(g.view, 1e4);
    enc.set_params(pvec, pvec, g.view);
    auto ctx = enc.forward(gx.view, nullptr);
    enc.backward(*ctx, gx.view, dy.view, dy.view, nullptr, false, GradientMode::Overwrite);
    return download(g.view);
  };
  for (int round = 0; round < 5; ++round) {
    Dev dy = upload(random_values(rng, size_t(batch) * W, DType::F16, 0.25, 1.0), DType::F16, batch, W);
    EXPECT_LE(worst_segment_error(*fast, gradients(*fast, dy), gradients(*det, dy)), 2e-3) << "round " << round;
  }

  Dev dy = upload(random_values(rng, size_t(batch) * W, DType::F16, 0.25, 1.0), DType::F16, batch, W);
  TensorView xs = gx.view, dys = dy.view;
  xs.stream = dys.stream = stream.get();
  Dev g = dev_matrix(DType::F16, 1, int64_t(n));
  fill_tensor(g.view, 1e4);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);  // the uploads and the fill
  fast->set_params(pvec, pvec, g.view);
  auto ctx = fast->forward(xs, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  tinyfuse::testing::CapturedGraph captured(stream, gpuStreamCaptureModeGlobal, [&] {
    fast->backward(*ctx, xs, dys, dys, nullptr, false, GradientMode::Overwrite);
  });
  ASSERT_EQ(captured.failure(), "");
  ASSERT_EQ(captured.launch(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<double> replayed = download(g.view);
  EXPECT_LE(worst_segment_error(*fast, replayed, gradients(*det, dy)), 2e-3) << "graph replay";
}

// W4's grid (3-D, 16 levels of up to 2^19 entries, base 16, scale 1.447), and the same with 14
// levels (its last group of levels two short): their FP32 sums outgrow a quarter of L2 (the
// fixed-point ones even more), so both modes' contribution kernels take their (record, level) pairs
// in groups of levels; forward, both backwards and the second order against the CPU FP64 reference
// as every case. Its finest level has about 4,100 cells per axis, and the GPU (as tiny-cuda-nn)
// forms x * scale in FP32: the cell fractions, so every result, carry up to half an ulp of 4,100
// (1.2e-4) that the small cases' tolerances (2e-5 for FP32) do not allow; the results here are
// held to twice that ulp (a record or level taken for another would be off by O(1)).
TEST_F(GridGpu, GroupedContributionsWhereTheSumsOutgrowL2) {
  int device = 0, l2_bytes = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device), cudaSuccess);
  for (uint32_t levels : {16u, 14u}) {
    SCOPED_TRACE(std::to_string(levels) + " levels");
    Case c;
    c.dims = 3, c.features = 2, c.levels = levels, c.log2_size = 19, c.base = 16, c.per_level_scale = 1.447f;
    const double finest = c.base * std::pow(double(c.per_level_scale), c.levels - 1);
    const double position_tol = 2 * std::ldexp(1.0, std::ilogb(finest) - 23);
    const size_t n_params = make_gpu(c, false, DType::F16, DType::F16)->n_params();
    ASSERT_GT(n_params * sizeof(float), size_t(l2_bytes) / 4) << "the case must take the grouped order";
    check_case(c, 3001, DType::F16, DType::F16, 1, 75 + levels, position_tol);
    check_case(c, 3001, DType::F32, DType::F32, 16, 76 + levels, position_tol);
  }
}

// A NaN in one record's dL/doutput at image scale reaches its level through the shared-memory
// sums (no fixed-point scale exists for that block) and stays out of the other levels.
TEST_F(GridGpu, NonFiniteGradientsPropagateThroughSharedLevels) {
  const int64_t batch = int64_t(1) << 18;
  Pcg32 rng(97);
  auto enc = cuda::make_grid_encoding(parse_grid_config(image_grid_config(), "encoding", 2));
  const size_t n = enc->n_params();
  const uint32_t W = enc->padded_output_width();
  std::vector<double> x(size_t(batch) * 2);
  for (auto& xi : x) xi = rng.next_float();
  std::vector<double> dy = random_values(rng, size_t(batch) * W, DType::F32);
  dy[size_t(12345) * W + 1] = NAN;  // level 0, feature 1
  Dev p = upload(random_values(rng, n, DType::F32), DType::F32, 1, int64_t(n));
  Dev gx = upload(x, DType::F32, batch, 2), gdy = upload(dy, DType::F32, batch, W);
  const auto [nan_in_level0, nan_elsewhere] = nans_inside_and_outside_level(*enc, fp32_param_gradients(*enc, p, gx, gdy), 0);
  EXPECT_GE(nan_in_level0, 1u);
  EXPECT_EQ(nan_elsewhere, 0u);
}

// The default HashGrid (16 levels up to scale 2^19): positions need the FP32 arithmetic both
// sides share, so the reference here is the CPU FP32 engine (same fmaf positions, same entries).
TEST_F(GridGpu, DefaultHashGridMatchesCpuFp32) {
  for (uint32_t dims : {2u, 3u}) {
    const json cfg = {{"otype", "HashGrid"}};
    auto cpu = create_encoding(cfg, dims);
    auto gpu = cuda::make_grid_encoding(parse_grid_config(cfg, "encoding", dims));
    const size_t n = cpu->n_params();
    const int64_t batch = 4096;
    Pcg32 rng(80 + dims);
    std::vector<float> params(n), x(batch * dims), y(batch * 32), dy(batch * 32), dx(batch * dims), grads(n);
    cpu->initialize_params(rng, params.data(), 1e4f);
    for (auto& e : x) e = rng.next_float();
    for (auto& e : dy) e = rng.next_float() - 0.5f;
    auto pv = TensorView::vector(params.data(), n);
    cpu->set_params(pv, pv, TensorView::vector(grads.data(), n));
    auto xv = TensorView::matrix(x.data(), batch, dims), yv = TensorView::matrix(y.data(), batch, 32);
    auto dyv = TensorView::matrix(dy.data(), batch, 32), dxv = TensorView::matrix(dx.data(), batch, dims);
    auto ctx = cpu->forward(xv, &yv);
    cpu->backward(*ctx, xv, yv, dyv, &dxv, false, GradientMode::Overwrite);

    auto as_double = [](const std::vector<float>& f) { return std::vector<double>(f.begin(), f.end()); };
    Dev p = upload(as_double(params), DType::F32, 1, int64_t(n)), g = dev_matrix(DType::F32, 1, int64_t(n));
    Dev gx = upload(as_double(x), DType::F32, batch, dims), gy = dev_matrix(DType::F32, batch, 32);
    Dev gdy = upload(as_double(dy), DType::F32, batch, 32), gdx = dev_matrix(DType::F32, batch, dims);
    const auto pvec = TensorView::vector(p.view.data, DType::F32, Device::CUDA, int64_t(n));
    gpu->set_params(pvec, pvec, TensorView::vector(g.view.data, DType::F32, Device::CUDA, int64_t(n)));
    auto gctx = gpu->forward(gx.view, &gy.view);
    gpu->backward(*gctx, gx.view, gy.view, gdy.view, &gdx.view, false, GradientMode::Overwrite);
    EXPECT_LE(rel_l2(download(gy.view), as_double(y)), 1e-6) << dims;
    EXPECT_LE(rel_l2(download(gdx.view), as_double(dx)), 1e-5) << dims;
    EXPECT_LE(worst_segment_error(*gpu, download(g.view), as_double(grads)), 1e-5) << dims;
  }
}

TEST_F(GridGpu, GradientModesAndEmptyBatch) {
  Case c;
  for (bool deterministic : {false, true})
    for (DType dt : {DType::F32, DType::F16}) {
      SCOPED_TRACE(std::string(deterministic ? "deterministic " : "fast ") + to_string(dt));
      auto enc = make_gpu(c, deterministic, dt, dt);
      const size_t n = enc->n_params();
      const int64_t batch = 300;
      Pcg32 rng(90);
      const GridSpec spec = parse_grid_config(c.config(false), "encoding", c.dims);
      Dev p = upload(random_values(rng, n, dt), dt, 1, int64_t(n)), g = dev_matrix(dt, 1, int64_t(n));
      Dev x = upload(inputs_inside_cells(spec, rng, batch), DType::F32, batch, 2);
      Dev dy = upload(random_values(rng, size_t(batch) * 8, dt, 0.25, 1.0), dt, batch, 8);
      const auto pvec = TensorView::vector(p.view.data, dt, Device::CUDA, int64_t(n));
      enc->set_params(pvec, pvec, TensorView::vector(g.view.data, dt, Device::CUDA, int64_t(n)));
      auto ctx = enc->forward(x.view, nullptr);
      auto back = [&](GradientMode m) { enc->backward(*ctx, x.view, dy.view, dy.view, nullptr, false, m); };
      back(GradientMode::Overwrite);
      const auto once = download(g.view);
      back(GradientMode::Accumulate);
      const auto twice = download(g.view);
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(twice[i], 2 * once[i], dt == DType::F16 ? 2e-3 * std::abs(once[i]) + 1e-6 : 1e-5 * std::abs(once[i]) + 1e-9) << i;
      fill_tensor(g.view, 5.0);
      back(GradientMode::Ignore);
      for (double e : download(g.view)) ASSERT_EQ(e, 5.0);
      // An empty batch overwrites with zeros.
      Dev x0 = dev_matrix(DType::F32, 0, 2), dy0 = dev_matrix(dt, 0, 8);
      auto ctx0 = enc->forward(x0.view, nullptr);
      enc->backward(*ctx0, x0.view, dy0.view, dy0.view, nullptr, false, GradientMode::Overwrite);
      for (double e : download(g.view)) ASSERT_EQ(e, 0.0);
    }
}

// The fast mode's FP16 gradients are converted from its FP32 sums with vector stores where they
// start 8-byte aligned and element by element where they do not (a view at an odd offset): both
// write every entry alike, overwriting and accumulating. (The sums' float atomics may add in
// another order from run to run, hence the FP16 tolerance.)
TEST_F(GridGpu, Fp16GradientsAtAnUnalignedOffsetMatchAligned) {
  Case c;
  auto enc = make_gpu(c, false, DType::F16, DType::F16);
  const size_t n = enc->n_params();
  const int64_t batch = 1000;
  const uint32_t W = enc->padded_output_width();
  Pcg32 rng(91);
  const GridSpec spec = parse_grid_config(c.config(false), "encoding", c.dims);
  Dev p = upload(random_values(rng, n, DType::F16), DType::F16, 1, int64_t(n));
  Dev x = upload(inputs_inside_cells(spec, rng, batch), DType::F32, batch, c.dims);
  Dev dy = upload(random_values(rng, size_t(batch) * W, DType::F16, 0.25, 1.0), DType::F16, batch, W);
  const auto pvec = TensorView::vector(p.view.data, DType::F16, Device::CUDA, int64_t(n));
  Dev g = dev_matrix(DType::F16, 1, int64_t(n) + 1);
  std::vector<double> once[2], twice[2];
  for (size_t offset : {0, 1}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const auto gv = TensorView::vector(static_cast<char*>(g.view.data) + offset * 2, DType::F16, Device::CUDA, int64_t(n));
    fill_tensor(g.view, 0.25);
    enc->set_params(pvec, pvec, gv);
    auto ctx = enc->forward(x.view, nullptr);
    enc->backward(*ctx, x.view, dy.view, dy.view, nullptr, false, GradientMode::Overwrite);
    once[offset] = download(gv);
    enc->backward(*ctx, x.view, dy.view, dy.view, nullptr, false, GradientMode::Accumulate);
    twice[offset] = download(gv);
    // The element before (offset 1) or after (offset 0) the view keeps its fill.
    EXPECT_EQ(download(g.view)[offset == 0 ? n : 0], 0.25);
  }
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    nonzero += once[0][i] != 0.0;
    ASSERT_NEAR(once[1][i], once[0][i], 2e-3 * std::abs(once[0][i]) + 1e-6) << i;
    ASSERT_NEAR(twice[1][i], twice[0][i], 2e-3 * std::abs(twice[0][i]) + 1e-6) << i;
    ASSERT_NEAR(twice[1][i], 2 * once[1][i], 2e-3 * std::abs(once[1][i]) + 1e-6) << i;
  }
  EXPECT_GT(nonzero, n / 4) << "the batch reaches most entries";
}

TEST_F(GridGpu, NonFiniteGradientsPropagate) {
  // A NaN in dL/doutput must not vanish: the deterministic mode marks the level NaN, the fast
  // mode's atomics carry it into the entries it touches.
  Case c;
  for (bool deterministic : {false, true}) {
    auto enc = make_gpu(c, deterministic, DType::F32, DType::F32);
    const size_t n = enc->n_params();
    Pcg32 rng(91);
    const GridSpec spec = parse_grid_config(c.config(false), "encoding", c.dims);
    std::vector<double> dyh = random_values(rng, 10 * 8, DType::F32);
    dyh[3 * 8 + 2] = NAN;  // record 3, level 1
    Dev p = upload(random_values(rng, n, DType::F32), DType::F32, 1, int64_t(n));
    Dev x = upload(inputs_inside_cells(spec, rng, 10), DType::F32, 10, 2), dy = upload(dyh, DType::F32, 10, 8);
    const auto [nan_in_level1, nan_elsewhere] = nans_inside_and_outside_level(*enc, fp32_param_gradients(*enc, p, x, dy), 1);
    EXPECT_GE(nan_in_level1, 1u) << deterministic;
    EXPECT_EQ(nan_elsewhere, 0u) << deterministic;
  }
}

TEST_F(GridGpu, ArgumentChecks) {
  Case c;
  EXPECT_THROW(make_gpu(c, false, DType::F64, DType::F32), ConfigError);
  EXPECT_THROW(make_gpu(c, false, DType::F32, DType::BF16), ConfigError);
  auto enc = make_gpu(c, false, DType::F32, DType::F16);
  EXPECT_EQ(enc->device(), Device::CUDA);
  EXPECT_EQ(enc->input_dtype(), DType::F32);
  EXPECT_EQ(enc->output_dtype(), DType::F16);
  const size_t n = enc->n_params();
  Dev p = dev_matrix(DType::F32, 1, int64_t(n), 0.0);
  Dev x = dev_matrix(DType::F32, 4, 2, 0.5), y32 = dev_matrix(DType::F32, 4, 8);
  // No parameters yet.
  EXPECT_THROW(enc->inference(x.view, y32.view), Error);
  const auto pvec = TensorView::vector(p.view.data, DType::F32, Device::CUDA, int64_t(n));
  EXPECT_THROW(enc->set_params(TensorView::vector(p.view.data, DType::F32, Device::CUDA, int64_t(n) - 1), pvec, {}),
               ShapeError);
  enc->set_params(pvec, pvec, TensorView{});
  EXPECT_THROW(enc->inference(x.view, y32.view), ShapeError);  // output must be F16
  Dev y16 = dev_matrix(DType::F16, 4, 8);
  enc->inference(x.view, y16.view);
  auto ctx = enc->forward(x.view, nullptr);
  // Gradients requested without a gradient buffer.
  EXPECT_THROW(enc->backward(*ctx, x.view, y16.view, y16.view, nullptr, false, GradientMode::Overwrite), Error);
  Dev dx3 = dev_matrix(DType::F32, 4, 3);  // dL2/dinput of the wrong width
  EXPECT_THROW(enc->backward_backward_input(*ctx, x.view, x.view, y16.view, nullptr, &dx3.view, false, GradientMode::Ignore),
               ShapeError);
}

}  // namespace
