// GPU losses and optimizers against the CPU references, through the public factory:
//  - every loss on F32 and F16 predictions against the CPU FP64 loss on fresh random inputs, with
//    poisoned outputs (relative L2 <= 1e-5 for F32; FP16 gradients within 2e-3);
//  - every optimizer against the CPU optimizer for 20 steps on random gradients over matrix,
//    vector, grid and unsegmented parameters, F32 and F16 params (master weights within 1e-6
//    relative; F16 params are exactly the rounded master weights);
//  - state round trips GPU -> host -> GPU (and GPU -> CPU), rejected states, EMA inference
//    params, the Composite split, and stream capture of a whole step (no host synchronisation).
// Runs on the device machine; skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "testing/gpu_stream.h"
#include "testing/graph_capture.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

using Kind = ParamSegment::Kind;

float round_to(DType t, float v) { return t == DType::F16 ? half_bits_to_float(float_to_half_bits(v)) : v; }

// Any view's elements read back to the host as float (row-major; 1-D views as one row).
std::vector<float> to_host(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (out.empty()) return out;
  if (t.ndim == 1)
    copy_tensor(TensorView::matrix(out.data(), 1, t.numel()), TensorView::matrix(t.data, t.dtype, t.device, 1, t.numel(), t.stream));
  else
    copy_tensor(TensorView::matrix(out.data(), t.rows(), t.cols()), t);
  return out;
}

// A device buffer of `dtype` holding `values` (converted), shaped (rows, cols).
Buffer to_device(const std::vector<float>& values, DType dtype, int64_t rows, int64_t cols) {
  Buffer b(Device::CUDA, values.size() * dtype_size(dtype));
  if (!values.empty())
    copy_tensor(b.matrix(dtype, rows, cols), TensorView::matrix(const_cast<float*>(values.data()), rows, cols));
  return b;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

// ---- losses ------------------------------------------------------------------------------

const std::vector<std::string> kLosses = {"L2",   "L1",   "RelativeL2",   "RelativeL2Luminance", "RelativeL1",
                                          "MAPE", "SMAPE", "CrossEntropy", "Variance"};

class GpuLosses : public ::testing::TestWithParam<std::tuple<std::string, DType>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(GpuLosses, MatchCpuFp64Reference) {
  const std::string name = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  auto gpu = create_loss({{"otype", name}}, {Device::CUDA});
  auto cpu = create_loss({{"otype", name}}, {Device::CPU, DType::F64});
  EXPECT_EQ(gpu->device(), Device::CUDA);
  EXPECT_EQ(gpu->name(), cpu->name());
  EXPECT_EQ(gpu->hyperparams(), cpu->hyperparams());
  const bool positive = name == "CrossEntropy" || name == "Variance";  // need p > 0
  const float scale = dt == DType::F16 ? 128.0f : 1.0f;
  const double grad_tol = dt == DType::F16 ? 2e-3 : 1e-5;
  Pcg32 rng(dt == DType::F16 ? 11 : 10);
  for (auto [dims, width] : {std::pair<int64_t, int64_t>{3, 8}, {6, 16}, {4, 4}}) {
    for (int64_t batch : {1, 7, 1000, 4099}) {
      for (bool with_pdf : {false, true}) {
        SCOPED_TRACE(name + " " + to_string(dt) + " batch " + std::to_string(batch) + " dims " + std::to_string(dims) +
                     " width " + std::to_string(width) + (with_pdf ? " with pdf" : ""));
        std::vector<float> pred(batch * width), target(batch * dims), pdf(batch * dims);
        for (auto& v : pred) v = round_to(dt, positive ? 0.2f + 0.8f * rng.next_float() : rng.next_float() * 2 - 1);
        for (auto& v : target) v = positive ? rng.next_float() : rng.next_float() * 2 - 1;
        for (auto& v : pdf) v = 0.5f + 1.5f * rng.next_float();

        std::vector<double> p64(pred.begin(), pred.end()), t64(target.begin(), target.end()), d64(pdf.begin(), pdf.end());
        std::vector<double> ref_values(batch * width), ref_grads(batch * width);
        TensorView d64v = TensorView::matrix(d64.data(), batch, dims);
        cpu->evaluate(scale, TensorView::matrix(p64.data(), batch, width), TensorView::matrix(t64.data(), batch, dims),
                      TensorView::matrix(ref_values.data(), batch, width), TensorView::matrix(ref_grads.data(), batch, width),
                      with_pdf ? &d64v : nullptr);

        Buffer pb = to_device(pred, dt, batch, width), tb = to_device(target, DType::F32, batch, dims);
        Buffer db = to_device(pdf, DType::F32, batch, dims);
        Buffer vb(Device::CUDA, batch * width * sizeof(float)), gb(Device::CUDA, batch * width * dtype_size(dt));
        TensorView values = vb.matrix(DType::F32, batch, width), grads = gb.matrix(dt, batch, width);
        fill_tensor(values, NAN);  // poison: every element must be written
        fill_tensor(grads, NAN);
        TensorView dv = db.matrix(DType::F32, batch, dims);
        gpu->evaluate(scale, pb.matrix(dt, batch, width), tb.matrix(DType::F32, batch, dims), values, grads,
                      with_pdf ? &dv : nullptr);
        const std::vector<float> got_values = to_host(values), got_grads = to_host(grads);

        EXPECT_LE(rel_l2(got_values, ref_values), 1e-5) << "values";
        EXPECT_LE(rel_l2(got_grads, ref_grads), grad_tol) << "gradients";
        size_t bad = 0;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t d = 0; d < width; ++d) {
            const size_t i = b * width + d;
            if (d >= dims) {
              if (got_values[i] != 0.0f || got_grads[i] != 0.0f) ++bad;
              continue;
            }
            // Per element, gradients are products and quotients of the inputs (no cancellation).
            if (!(std::abs(got_grads[i] - ref_grads[i]) <= grad_tol * std::abs(ref_grads[i]) + 1e-7)) ++bad;
            if (!std::isfinite(got_values[i])) ++bad;
          }
        EXPECT_EQ(bad, 0u) << "elements with a wrong gradient, a non-finite value or non-zero padding";
        EXPECT_NEAR(sum_tensor(values), std::accumulate(ref_values.begin(), ref_values.end(), 0.0),
                    1e-5 * std::max(1.0, std::abs(std::accumulate(ref_values.begin(), ref_values.end(), 0.0))));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, GpuLosses, ::testing::Combine(::testing::ValuesIn(kLosses), ::testing::Values(DType::F32, DType::F16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param));
                         });

using GpuLossViews = GpuTest;

// Column slices of wider matrices (strided rows) work like contiguous views.
TEST_F(GpuLossViews, StridedViewsAndRejections) {
  const int64_t batch = 33, dims = 3, width = 8, wide = 20;
  auto gpu = create_loss({{"otype", "RelativeL2Luminance"}}, {Device::CUDA});
  auto cpu = create_loss({{"otype", "RelativeL2Luminance"}}, {Device::CPU, DType::F64});
  Pcg32 rng(4);
  std::vector<float> pred(batch * wide), target(batch * wide);
  for (auto& v : pred) v = rng.next_float() * 2 - 1;
  for (auto& v : target) v = rng.next_float() * 2 - 1;
  Buffer pb = to_device(pred, DType::F32, batch, wide), tb = to_device(target, DType::F32, batch, wide);
  Buffer vb(Device::CUDA, batch * wide * 4), gb(Device::CUDA, batch * wide * 4);
  fill_tensor(vb.matrix(DType::F32, batch, wide), -7.0);
  fill_tensor(gb.matrix(DType::F32, batch, wide), -7.0);
  TensorView pv = pb.matrix(DType::F32, batch, wide).cols_slice(5, width);
  TensorView tv = tb.matrix(DType::F32, batch, wide).cols_slice(2, dims);
  TensorView vv = vb.matrix(DType::F32, batch, wide).cols_slice(1, width);
  TensorView gv = gb.matrix(DType::F32, batch, wide).cols_slice(9, width);
  gpu->evaluate(4.0f, pv, tv, vv, gv);

  std::vector<double> p64(batch * width), t64(batch * dims), rv(batch * width), rg(batch * width);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t d = 0; d < width; ++d) p64[b * width + d] = pred[b * wide + 5 + d];
    for (int64_t d = 0; d < dims; ++d) t64[b * dims + d] = target[b * wide + 2 + d];
  }
  cpu->evaluate(4.0f, TensorView::matrix(p64.data(), batch, width), TensorView::matrix(t64.data(), batch, dims),
                TensorView::matrix(rv.data(), batch, width), TensorView::matrix(rg.data(), batch, width));
  EXPECT_LE(rel_l2(to_host(vv), rv), 1e-5);
  EXPECT_LE(rel_l2(to_host(gv), rg), 1e-5);
  const std::vector<float> all_v = to_host(vb.matrix(DType::F32, batch, wide));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < wide; ++c)
      if (c < 1 || c >= 1 + width) ASSERT_EQ(all_v[b * wide + c], -7.0f) << "wrote outside the values view";

  // Shapes, dtypes and devices are checked like on the CPU.
  std::vector<float> host(64);
  TensorView h = TensorView::matrix(host.data(), 4, 4);
  EXPECT_THROW(gpu->evaluate(1, h, h, h, h), ShapeError);  // host memory
  Buffer x(Device::CUDA, 64 * 4);
  TensorView m = x.matrix(DType::F32, 4, 4);
  EXPECT_THROW(gpu->evaluate(1, m, x.matrix(DType::F32, 4, 5), m, m), ShapeError);  // target wider
  EXPECT_THROW(gpu->evaluate(1, m, x.matrix(DType::F32, 3, 4), m, m), ShapeError);  // batch differs
  EXPECT_THROW(gpu->evaluate(1, m, m, m, x.matrix(DType::F16, 4, 4)), ShapeError);  // gradients not in prediction dtype
  EXPECT_THROW(gpu->evaluate(1, x.matrix(DType::BF16, 4, 4), m, m, x.matrix(DType::F16, 4, 4)), ShapeError);  // bf16 prediction, f16 gradients
  EXPECT_THROW(gpu->evaluate(1, x.matrix(DType::F32, 4, 2), x.matrix(DType::F32, 4, 2), x.matrix(DType::F32, 4, 2),
                             x.matrix(DType::F32, 4, 2)),
               ShapeError);  // luminance needs RGB
}

// The Trainer's buffers (dense rows of a multiple of 8, 16-byte aligned) take the vectorised loss
// kernel; other views the general one. Both must give the same bits, for every loss and dtype,
// with targets read as vectors or one by one, with and without a data pdf.
using GpuLossKernels = GpuTest;

TEST_F(GpuLossKernels, DenseAndStridedAgreeBitwise) {
  const int64_t batch = 1037;
  for (const std::string& name : kLosses)
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (auto [width, dims] : {std::pair<int64_t, int64_t>{64, 64}, {64, 3}, {16, 16}, {24, 5}, {8, 6}})
        for (bool with_pdf : {false, true}) {
          SCOPED_TRACE(name + " " + to_string(dt) + " width " + std::to_string(width) + " dims " + std::to_string(dims) +
                       (with_pdf ? " with pdf" : ""));
          auto loss = create_loss({{"otype", name}}, {Device::CUDA});
          const bool positive = name == "CrossEntropy" || name == "Variance";
          Pcg32 rng(static_cast<uint64_t>(width * 131 + dims));
          // Every view is cut from a buffer one column wider than it needs (offset 1): the dense
          // views use the first `width` columns of a (batch, width) buffer instead.
          std::vector<float> pred(batch * (width + 1)), target(batch * (dims + 1)), pdf(batch * dims);
          for (auto& v : pred) v = positive ? 0.2f + 0.8f * rng.next_float() : rng.next_float() * 2 - 1;
          for (auto& v : target) v = positive ? rng.next_float() : rng.next_float() * 2 - 1;
          for (auto& v : pdf) v = 0.5f + 1.5f * rng.next_float();
          std::vector<float> dense_pred(batch * width), dense_target(batch * dims);
          for (int64_t b = 0; b < batch; ++b) {
            for (int64_t d = 0; d < width; ++d) dense_pred[b * width + d] = pred[b * (width + 1) + 1 + d];
            for (int64_t d = 0; d < dims; ++d) dense_target[b * dims + d] = target[b * (dims + 1) + 1 + d];
          }
          Buffer pw = to_device(pred, dt, batch, width + 1), tw = to_device(target, DType::F32, batch, dims + 1);
          Buffer pd = to_device(dense_pred, dt, batch, width), td = to_device(dense_target, DType::F32, batch, dims);
          Buffer db = to_device(pdf, DType::F32, batch, dims);
          const TensorView pdfv = db.matrix(DType::F32, batch, dims);
          const TensorView* pdf_arg = with_pdf ? &pdfv : nullptr;
          auto run = [&](const TensorView& p, const TensorView& t, bool dense_outputs) {
            const int64_t cols = dense_outputs ? width : width + 1;
            Buffer vb(Device::CUDA, batch * cols * 4), gb(Device::CUDA, batch * cols * dtype_size(dt));
            TensorView v = vb.matrix(DType::F32, batch, cols), g = gb.matrix(dt, batch, cols);
            if (!dense_outputs) v = v.cols_slice(1, width), g = g.cols_slice(1, width);
            fill_tensor(v, NAN);
            fill_tensor(g, NAN);
            loss->evaluate(dt == DType::F32 ? 1.0f : 128.0f, p, t, v, g, pdf_arg);
            return std::make_pair(to_host(v), to_host(g));
          };
          const auto general = run(pw.matrix(dt, batch, width + 1).cols_slice(1, width),
                                   tw.matrix(DType::F32, batch, dims + 1).cols_slice(1, dims), false);
          const auto vector_target = run(pd.matrix(dt, batch, width), td.matrix(DType::F32, batch, dims), true);
          const auto scalar_target = run(pd.matrix(dt, batch, width), tw.matrix(DType::F32, batch, dims + 1).cols_slice(1, dims), true);
          for (const auto* got : {&vector_target, &scalar_target}) {
            ASSERT_EQ(got->first.size(), general.first.size());
            EXPECT_EQ(std::memcmp(got->first.data(), general.first.data(), general.first.size() * sizeof(float)), 0) << "values";
            EXPECT_EQ(std::memcmp(got->second.data(), general.second.data(), general.second.size() * sizeof(float)), 0)
                << "gradients";
          }
          size_t non_finite = 0;
          for (float x : general.first) non_finite += !std::isfinite(x);
          for (float x : general.second) non_finite += !std::isfinite(x);
          EXPECT_EQ(non_finite, 0u) << "every element written";

          // Per-row values (the Trainer's): row_loss_kernel for the strided views, the dense
          // kernel's per-row mode for the dense ones. Both must give the same bits, the
          // per-element mode's gradients, and the sum of its values to FP32 rounding (loss.h's
          // order: terms in groups of 8 columns, one division per row).
          auto run_rows = [&](const TensorView& p, const TensorView& t, bool dense_outputs) {
            const int64_t cols = dense_outputs ? width : width + 1;
            Buffer vb(Device::CUDA, batch * 2 * 4), gb(Device::CUDA, batch * cols * dtype_size(dt));
            TensorView v = dense_outputs ? vb.matrix(DType::F32, batch, 1) : vb.matrix(DType::F32, batch, 2).cols_slice(1, 1);
            TensorView g = gb.matrix(dt, batch, cols);
            if (!dense_outputs) g = g.cols_slice(1, width);
            fill_tensor(vb.matrix(DType::F32, batch, 2), NAN);
            fill_tensor(g, NAN);
            loss->evaluate(dt == DType::F32 ? 1.0f : 128.0f, p, t, v, g, pdf_arg);
            return std::make_pair(to_host(v), to_host(g));
          };
          const auto rows_general = run_rows(pw.matrix(dt, batch, width + 1).cols_slice(1, width),
                                             tw.matrix(DType::F32, batch, dims + 1).cols_slice(1, dims), false);
          const auto rows_dense = run_rows(pd.matrix(dt, batch, width), td.matrix(DType::F32, batch, dims), true);
          ASSERT_EQ(rows_dense.first.size(), rows_general.first.size());
          EXPECT_EQ(std::memcmp(rows_dense.first.data(), rows_general.first.data(), rows_general.first.size() * sizeof(float)), 0)
              << "row values, dense vs general kernel";
          size_t far = 0;
          for (int64_t b = 0; b < batch; ++b) {
            double sum = 0, magnitude = 0;
            for (int64_t d = 0; d < dims; ++d) sum += general.first[b * width + d], magnitude += std::abs(general.first[b * width + d]);
            const float got = rows_general.first[b];
            // ~16 FP32 additions and 2 roundings per row: under 1.1e-6 of the magnitude.
            if (!std::isfinite(got) || !(std::abs(got - sum) <= 2e-6 * magnitude + 1e-30)) ++far;
          }
          EXPECT_EQ(far, 0u) << "row values that are not their elements' sum to FP32 rounding";
          for (const auto* got : {&rows_general, &rows_dense})
            EXPECT_EQ(std::memcmp(got->second.data(), general.second.data(), general.second.size() * sizeof(float)), 0)
                << "gradients with row values";
        }
}

// ---- optimizers --------------------------------------------------------------------------

constexpr size_t kN = 3001;
ParamSegment seg(size_t offset, size_t count, Kind kind) {
  ParamSegment s;
  s.offset = offset;
  s.count = count;
  s.kind = kind;
  return s;
}
// Matrices, a vector, a grid, and one trailing element in no segment.
const std::vector<ParamSegment> kSegments = {seg(0, 1000, Kind::Matrix), seg(1000, 300, Kind::Vector),
                                             seg(1300, 1200, Kind::Matrix), seg(2500, 500, Kind::Grid)};
bool is_matrix(size_t i) { return i < 1000 || (i >= 1300 && i < 2500); }

struct OptCase {
  std::string label;
  json config;
};

std::vector<OptCase> optimizer_cases() {
  return {
      {"Adam", {{"otype", "Adam"}, {"learning_rate", 1e-2}, {"beta1", 0.8}, {"beta2", 0.95}, {"l2_reg", 1e-3},
                {"non_matrix_learning_rate_factor", 0.5}}},
      {"AdamBoundedDecayClip", {{"otype", "Adam"}, {"learning_rate", 5e-2}, {"adabound", true}, {"relative_decay", 0.2},
                                {"absolute_decay", 0.01}, {"clipping_magnitude", 0.6}}},
      {"AdamNonMatrixOnly", {{"otype", "Adam"}, {"optimize_matrix_params", false}}},
      {"SGD", {{"otype", "SGD"}, {"learning_rate", 0.05}, {"l2_reg", 0.01}}},
      {"ExponentialDecay", {{"otype", "ExponentialDecay"}, {"decay_start", 3}, {"decay_interval", 4}, {"decay_base", 0.5},
                            {"nested", {{"learning_rate", 0.01}}}}},
      {"EMA", {{"otype", "EMA"}, {"decay", 0.9}, {"nested", {{"learning_rate", 0.01}}}}},
      {"EMAofEMA", {{"otype", "EMA"}, {"decay", 0.8}, {"nested", {{"otype", "EMA"}, {"decay", 0.5}, {"nested", {{"otype", "SGD"}}}}}}},
      {"CompositeSgdAdam", {{"otype", "Composite"},
                            {"nested", {{{"otype", "SGD"}, {"learning_rate", 0.05}, {"n_params_to_optimize", 1300}},
                                        {{"otype", "Adam"}, {"learning_rate", 0.01}, {"n_params_to_optimize", 1701}}}}}},
      // Adam's slice starts at an odd element: its arrays are not 16-byte aligned, so it runs the
      // per-element kernel instead of the packed one.
      {"CompositeSgdAdamOddSplit", {{"otype", "Composite"},
                                    {"nested", {{{"otype", "SGD"}, {"learning_rate", 0.05}, {"n_params_to_optimize", 1301}},
                                                {{"otype", "Adam"}, {"learning_rate", 0.01}, {"n_params_to_optimize", 1700}}}}}},
      {"CompositeDecayEma", {{"otype", "Composite"},
                             {"nested", {{{"otype", "ExponentialDecay"}, {"decay_start", 2}, {"decay_interval", 3},
                                          {"n_params_to_optimize", 1000}},
                                         {{"otype", "EMA"}, {"decay", 0.7}, {"n_params_to_optimize", 2001},
                                          {"nested", {{"otype", "SGD"}, {"learning_rate", 0.1}}}}}}}},
  };
}

std::vector<float> initial_weights(uint32_t seed) {
  Pcg32 rng(seed);
  std::vector<float> w(kN);
  for (auto& x : w) x = (rng.next_float() < 0.5f ? -1.0f : 1.0f) * (0.1f + 0.9f * rng.next_float());
  return w;
}

// loss_scale * dL/dw for step s, already representable in `dt`; some non-matrix entries (and
// one matrix entry) are exactly zero, so Adam's per-parameter counters drift apart.
std::vector<float> step_gradient(int s, DType dt, float loss_scale) {
  Pcg32 rng(1000 + s);
  std::vector<float> g(kN);
  for (size_t i = 0; i < kN; ++i) {
    g[i] = round_to(dt, loss_scale * (rng.next_float() < 0.5f ? -1.0f : 1.0f) * (0.01f + rng.next_float()));
    if (i % 5 == static_cast<size_t>(s) % 5 && !is_matrix(i)) g[i] = 0.0f;
  }
  g[7] = 0.0f;
  return g;
}

// The weights a Trainer hands a GPU optimizer: F32 master, params and gradients in `dtype`.
struct GpuWeights {
  DType dtype;
  Buffer master, params, grads;
  Stream stream = nullptr;
  GpuWeights(const std::vector<float>& w, DType dt) : dtype(dt) {
    master = to_device(w, DType::F32, 1, static_cast<int64_t>(w.size()));
    params = to_device(w, dt, 1, static_cast<int64_t>(w.size()));
    grads = Buffer(Device::CUDA, w.size() * dtype_size(dt));
  }
  GpuWeights(const GpuWeights& o) : dtype(o.dtype) {
    master = Buffer(Device::CUDA, kN * 4);
    params = Buffer(Device::CUDA, kN * dtype_size(dtype));
    grads = Buffer(Device::CUDA, kN * dtype_size(dtype));
    copy_tensor(master.matrix(DType::F32, 1, kN), o.master.matrix(DType::F32, 1, kN));
    copy_tensor(params.matrix(dtype, 1, kN), o.params.matrix(dtype, 1, kN));
  }
  TensorView mv() const { return master.vector(DType::F32, kN, stream); }
  TensorView pv() const { return params.vector(dtype, kN, stream); }
  TensorView gv() const { return grads.vector(dtype, kN, stream); }
  void step(Optimizer& opt, float loss_scale, const std::vector<float>& g) {
    copy_tensor(grads.matrix(dtype, 1, kN), TensorView::matrix(const_cast<float*>(g.data()), 1, kN));
    opt.step(loss_scale, mv(), pv(), gv());
  }
};

struct CpuWeights {
  std::vector<float> master, params;
  explicit CpuWeights(const std::vector<float>& w) : master(w), params(w) {}
  void step(Optimizer& opt, float loss_scale, std::vector<float> g) {
    opt.step(loss_scale, TensorView::vector(master.data(), kN), TensorView::vector(params.data(), kN),
             TensorView::vector(g.data(), kN));
  }
};

// max_i |got - want| / max(1, |want|)
double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double m = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]) / std::max(1.0, std::abs(static_cast<double>(want[i])));
    m = std::max(m, std::isfinite(d) ? d : INFINITY);
  }
  return m;
}

class GpuOptimizers : public ::testing::TestWithParam<std::tuple<OptCase, DType>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(GpuOptimizers, MatchCpuOptimizerFor20Steps) {
  const OptCase& c = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  auto cpu = create_optimizer(c.config, {Device::CPU});
  auto gpu = create_optimizer(c.config, {Device::CUDA});
  EXPECT_EQ(gpu->device(), Device::CUDA);
  EXPECT_EQ(gpu->name(), cpu->name());
  EXPECT_EQ(gpu->hyperparams(), cpu->hyperparams());
  EXPECT_EQ(gpu->has_inference_params(), cpu->has_inference_params());
  cpu->allocate(kN, kSegments);
  gpu->allocate(kN, kSegments);
  const float loss_scale = dt == DType::F16 ? 128.0f : 1.0f;
  const std::vector<float> w0 = initial_weights(3);
  CpuWeights cw(w0);
  GpuWeights gw(std::vector<float>(w0), dt);
  // (CPU params are f32: the CPU has no f16; its master weights follow the same arithmetic.)
  Buffer inference(Device::CUDA, kN * dtype_size(dt));
  std::vector<float> cpu_inference(kN);
  for (int s = 0; s < 20; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const std::vector<float> g = step_gradient(s, dt, loss_scale);
    cw.step(*cpu, loss_scale, g);
    gw.step(*gpu, loss_scale, g);
    ASSERT_EQ(gpu->step_count(), cpu->step_count());
    ASSERT_EQ(gpu->learning_rate(), cpu->learning_rate());
    if (s % 5 == 4 || s == 19) {
      const std::vector<float> gm = to_host(gw.mv());
      ASSERT_LE(max_rel_diff(gm, cw.master), 1e-6) << c.label << " " << to_string(dt) << ": master weights";
      const std::vector<float> gp = to_host(gw.pv());
      size_t mismatched = 0;
      for (size_t i = 0; i < kN; ++i) mismatched += gp[i] != round_to(dt, gm[i]);
      ASSERT_EQ(mismatched, 0u) << "params must be the master weights rounded to " << to_string(dt);
    }
    if (gpu->has_inference_params()) {
      gpu->write_inference_params(inference.vector(dt, kN));
      cpu->write_inference_params(TensorView::vector(cpu_inference.data(), kN));
    }
  }
  if (gpu->has_inference_params()) {
    const std::vector<float> gi = to_host(inference.vector(dt, kN));
    if (dt == DType::F32) {
      EXPECT_LE(max_rel_diff(gi, cpu_inference), 1e-6) << "inference params";
    } else {
      // The GPU averages the f16 weights the model computes with, then rounds to f16 again.
      double m = 0;
      for (size_t i = 0; i < kN; ++i)
        m = std::max(m, std::abs(static_cast<double>(gi[i]) - cpu_inference[i]) / std::max(1.0f, std::abs(cpu_inference[i])));
      EXPECT_LE(m, 2e-3) << "inference params (f16)";
    }
  }
  // The state is the CPU's, value for value (f16 EMA averages differ by the f16 rounding).
  EXPECT_EQ(gpu->state_header(), cpu->state_header());
  const std::vector<float> gs = gpu->state_data(), cs = cpu->state_data();
  ASSERT_EQ(gs.size(), cs.size());
  if (dt == DType::F32 || !gpu->has_inference_params()) {
    size_t bad = 0;
    for (size_t i = 0; i < cs.size(); ++i) bad += !(std::abs(gs[i] - cs[i]) <= 1e-5 * std::abs(cs[i]) + 1e-9);
    EXPECT_EQ(bad, 0u) << "state elements differing from the CPU's";
  }
}

TEST_P(GpuOptimizers, StateRoundTripGpuHostGpuAndToCpu) {
  const OptCase& c = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  const float loss_scale = dt == DType::F16 ? 128.0f : 1.0f;
  auto a = create_optimizer(c.config, {Device::CUDA}), b = create_optimizer(c.config, {Device::CUDA});
  a->allocate(kN, kSegments);
  b->allocate(kN, kSegments);
  GpuWeights wa(initial_weights(5), dt);
  for (int s = 0; s < 4; ++s) wa.step(*a, loss_scale, step_gradient(s, dt, loss_scale));
  const json header = json::parse(a->state_header().dump());  // through text, as a checkpoint carries it
  const std::vector<float> data = a->state_data();

  // A rejected state leaves b as it was.
  const std::vector<float> b_data = b->state_data();
  std::vector<float> broken = data;
  if (!broken.empty()) {
    broken.back() = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THROW(b->load_state(header, broken), Error);
    EXPECT_EQ(b->state_data(), b_data);
    EXPECT_EQ(b->step_count(), 0u);
  }
  json wrong = header;
  wrong["n_params"] = kN + 1;
  EXPECT_THROW(b->load_state(wrong, data), Error);

  b->load_state(header, data);
  EXPECT_EQ(b->state_header(), a->state_header());
  EXPECT_EQ(b->state_data(), data);
  EXPECT_EQ(b->step_count(), a->step_count());
  EXPECT_EQ(b->learning_rate(), a->learning_rate());

  // The same state on the CPU (f32 params) continues like the GPU.
  auto cpu = create_optimizer(c.config, {Device::CPU});
  cpu->allocate(kN, kSegments);
  cpu->load_state(header, data);
  CpuWeights cw(to_host(wa.mv()));

  GpuWeights wb(wa);
  for (int s = 4; s < 8; ++s) {
    const std::vector<float> g = step_gradient(s, dt, loss_scale);
    wa.step(*a, loss_scale, g);
    wb.step(*b, loss_scale, g);
    cw.step(*cpu, loss_scale, g);
  }
  const std::vector<float> ma = to_host(wa.mv());
  EXPECT_EQ(ma, to_host(wb.mv())) << "GPU -> host -> GPU continues bit for bit";
  EXPECT_EQ(to_host(wa.pv()), to_host(wb.pv()));
  EXPECT_EQ(a->state_data(), b->state_data());
  EXPECT_LE(max_rel_diff(ma, cw.master), 1e-6) << "GPU -> CPU continues alike";
  if (a->has_inference_params()) {
    Buffer ia(Device::CUDA, kN * dtype_size(dt)), ib(Device::CUDA, kN * dtype_size(dt));
    a->write_inference_params(ia.vector(dt, kN));
    b->write_inference_params(ib.vector(dt, kN));
    EXPECT_EQ(to_host(ia.vector(dt, kN)), to_host(ib.vector(dt, kN)));
  }
}

INSTANTIATE_TEST_SUITE_P(All, GpuOptimizers,
                         ::testing::Combine(::testing::ValuesIn(optimizer_cases()), ::testing::Values(DType::F32, DType::F16)),
                         [](const auto& info) {
                           return std::get<0>(info.param).label + "_" + to_string(std::get<1>(info.param));
                         });

using GpuOptimizerDetails = GpuTest;

TEST_F(GpuOptimizerDetails, ParamsAliasingMasterAndArgumentChecks) {
  const json config = {{"otype", "Adam"}, {"learning_rate", 0.01}};
  auto a = create_optimizer(config, {Device::CUDA}), b = create_optimizer(config, {Device::CUDA});
  a->allocate(kN, kSegments);
  b->allocate(kN, kSegments);
  GpuWeights wa(initial_weights(6), DType::F32), wb(initial_weights(6), DType::F32);
  for (int s = 0; s < 3; ++s) {
    const std::vector<float> g = step_gradient(s, DType::F32, 1.0f);
    wa.step(*a, 1.0f, g);
    copy_tensor(wb.grads.matrix(DType::F32, 1, kN), TensorView::matrix(const_cast<float*>(g.data()), 1, kN));
    b->step(1.0f, wb.mv(), wb.mv(), wb.gv());  // params are the master weights
  }
  EXPECT_EQ(to_host(wa.mv()), to_host(wb.mv()));

  GpuWeights h(initial_weights(6), DType::F16);
  EXPECT_THROW(b->step(1.0f, h.mv(), h.master.vector(DType::F16, kN), h.gv()), ShapeError);  // f16 view of master
  EXPECT_THROW(b->step(0.0f, h.mv(), h.pv(), h.gv()), Error);
  EXPECT_THROW(b->step(1.0f, h.mv(), h.pv(), h.grads.vector(DType::F16, kN - 1)), ShapeError);
  std::vector<float> host(kN);
  EXPECT_THROW(b->step(1.0f, TensorView::vector(host.data(), kN), h.pv(), h.gv()), ShapeError);  // host master
  auto fresh = create_optimizer(config, {Device::CUDA});
  EXPECT_THROW(fresh->step(1.0f, h.mv(), h.pv(), h.gv()), Error);  // before allocate
  EXPECT_THROW(fresh->allocate(4, {seg(2, 3, Kind::Matrix)}), ShapeError);
  EXPECT_THROW(create_optimizer({{"otype", "Composite"}, {"nested", {{{"n_params_to_optimize", 3}}}}}, {Device::CUDA})
                   ->allocate(4, {}),
               ConfigError);
}

TEST_F(GpuOptimizerDetails, EmaInferenceParamsAreTheBiasCorrectedAverage) {
  for (DType dt : {DType::F32, DType::F16}) {
    SCOPED_TRACE(to_string(dt));
    const double decay = 0.9;
    auto opt = create_optimizer({{"otype", "EMA"}, {"decay", decay}, {"nested", {{"otype", "SGD"}, {"learning_rate", 0.1}, {"l2_reg", 0.0}}}},
                                {Device::CUDA});
    EXPECT_TRUE(opt->has_inference_params());
    opt->allocate(kN, {});
    Buffer out(Device::CUDA, kN * dtype_size(dt));
    EXPECT_THROW(opt->write_inference_params(out.vector(dt, kN)), Error);  // no average before the first step
    GpuWeights w(initial_weights(8), dt);
    std::vector<std::vector<float>> history;  // the weights the model computed with after each step
    for (int t = 1; t <= 6; ++t) {
      w.step(*opt, 1.0f, step_gradient(t, dt, 1.0f));
      history.push_back(to_host(w.pv()));
      fill_tensor(out.vector(dt, kN), NAN);
      opt->write_inference_params(out.vector(dt, kN));
      const std::vector<float> got = to_host(out.vector(dt, kN));
      double worst = 0;
      for (size_t i = 0; i < kN; ++i) {
        double sum = 0;
        for (int k = 1; k <= t; ++k) sum += std::pow(decay, t - k) * (1 - decay) * history[k - 1][i];
        const double want = sum / (1 - std::pow(decay, t));
        const double tol = dt == DType::F16 ? 1e-3 * std::max(1.0, std::abs(want)) : 5e-6 * std::max(1.0, std::abs(want));
        worst = std::max(worst, std::abs(got[i] - want) / tol);
      }
      EXPECT_LE(worst, 1.0) << "t " << t;
    }
  }
}

TEST_F(GpuOptimizerDetails, CompositeIsItsPartsOnSlices) {
  const json sgd = {{"otype", "SGD"}, {"learning_rate", 0.05}}, adam = {{"otype", "Adam"}, {"learning_rate", 0.01}, {"l2_reg", 0.1}};
  json sgd_entry = sgd, adam_entry = adam;
  sgd_entry["n_params_to_optimize"] = 1300;
  adam_entry["n_params_to_optimize"] = kN - 1300;
  auto comp = create_optimizer({{"otype", "Composite"}, {"nested", {sgd_entry, adam_entry}}}, {Device::CUDA});
  auto first = create_optimizer(sgd, {Device::CUDA}), second = create_optimizer(adam, {Device::CUDA});
  comp->allocate(kN, kSegments);
  // Segments of the second range, rebased: [1300, 2500) matrix, [2500, 3000) grid, then none.
  first->allocate(1300, {seg(0, 1000, Kind::Matrix), seg(1000, 300, Kind::Vector)});
  second->allocate(kN - 1300, {seg(0, 1200, Kind::Matrix), seg(1200, 500, Kind::Grid)});
  for (DType dt : {DType::F32, DType::F16}) {
    const float scale = dt == DType::F16 ? 128.0f : 1.0f;
    GpuWeights whole(initial_weights(9), dt), parts(initial_weights(9), dt);
    for (int s = 0; s < 5; ++s) {
      const std::vector<float> g = step_gradient(s, dt, scale);
      whole.step(*comp, scale, g);
      copy_tensor(parts.grads.matrix(dt, 1, kN), TensorView::matrix(const_cast<float*>(g.data()), 1, kN));
      auto slice = [](const TensorView& v, int64_t begin, int64_t count) {
        return TensorView::vector(static_cast<char*>(v.data) + begin * dtype_size(v.dtype), v.dtype, v.device, count, v.stream);
      };
      first->step(scale, slice(parts.mv(), 0, 1300), slice(parts.pv(), 0, 1300), slice(parts.gv(), 0, 1300));
      second->step(scale, slice(parts.mv(), 1300, kN - 1300), slice(parts.pv(), 1300, kN - 1300),
                   slice(parts.gv(), 1300, kN - 1300));
    }
    EXPECT_EQ(to_host(whole.mv()), to_host(parts.mv())) << to_string(dt);
    EXPECT_EQ(to_host(whole.pv()), to_host(parts.pv())) << to_string(dt);
    comp->allocate(kN, kSegments);
    first->allocate(1300, {seg(0, 1000, Kind::Matrix), seg(1000, 300, Kind::Vector)});
    second->allocate(kN - 1300, {seg(0, 1200, Kind::Matrix), seg(1200, 500, Kind::Grid)});
  }

  // With an EMA in one range, the other range's inference params are its trained params.
  auto mixed = create_optimizer({{"otype", "Composite"},
                                 {"nested", {sgd_entry, {{"otype", "EMA"}, {"decay", 0.5}, {"n_params_to_optimize", kN - 1300}}}}},
                                {Device::CUDA});
  mixed->allocate(kN, kSegments);
  GpuWeights w(initial_weights(10), DType::F16);
  Buffer out(Device::CUDA, kN * 2);
  EXPECT_THROW(mixed->write_inference_params(out.vector(DType::F16, kN)), Error);  // before the first step
  for (int s = 0; s < 3; ++s) w.step(*mixed, 128.0f, step_gradient(s, DType::F16, 128.0f));
  mixed->write_inference_params(out.vector(DType::F16, kN));
  const std::vector<float> got = to_host(out.vector(DType::F16, kN)), params = to_host(w.pv());
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 1300, params.begin()));
  EXPECT_FALSE(std::equal(got.begin() + 1300, got.end(), params.begin() + 1300)) << "EMA range is averaged";
}

// A whole training step (loss, then every kind of optimizer) queued on a stream under global
// stream capture: any host synchronisation or synchronous allocation would break the capture.
TEST_F(GpuOptimizerDetails, LossAndStepsQueueWithoutHostSynchronisation) {
  const tinyfuse::testing::OwnedStream stream;
  std::vector<std::unique_ptr<Optimizer>> opts;
  std::vector<std::unique_ptr<GpuWeights>> weights;
  for (const OptCase& c : optimizer_cases()) {
    for (DType dt : {DType::F32, DType::F16}) {
      opts.push_back(create_optimizer(c.config, {Device::CUDA}));
      opts.back()->allocate(kN, kSegments);
      weights.push_back(std::make_unique<GpuWeights>(initial_weights(12), dt));
      weights.back()->stream = stream;
      // One ordinary step first (nothing lazily allocated later).
      weights.back()->step(*opts.back(), 1.0f, step_gradient(0, dt, 1.0f));
    }
  }
  auto loss = create_loss({{"otype", "RelativeL2"}}, {Device::CUDA});
  Buffer pred(Device::CUDA, 256 * 16 * 2), target(Device::CUDA, 256 * 4 * 4), values(Device::CUDA, 256 * 16 * 4),
      grads(Device::CUDA, 256 * 16 * 2);
  fill_tensor(pred.matrix(DType::F16, 256, 16), 0.5);
  fill_tensor(target.matrix(DType::F32, 256, 4), 0.25);
  synchronize(Device::CUDA, nullptr);
  std::vector<Buffer> inference;
  for (auto& w : weights) inference.emplace_back(Device::CUDA, kN * dtype_size(w->dtype));

  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const tinyfuse::testing::CapturedGraph captured(stream, gpuStreamCaptureModeGlobal, [&] {
    loss->evaluate(128.0f, pred.matrix(DType::F16, 256, 16, stream), target.matrix(DType::F32, 256, 4, stream),
                   values.matrix(DType::F32, 256, 16, stream), grads.matrix(DType::F16, 256, 16, stream));
    for (size_t k = 0; k < opts.size(); ++k) {
      GpuWeights& w = *weights[k];
      opts[k]->step(1.0f, w.mv(), w.pv(), w.gv());
      if (opts[k]->has_inference_params())
        opts[k]->write_inference_params(inference[k].vector(w.dtype, kN, stream));
    }
  });
  EXPECT_EQ(captured.failure(), "");
}

// The Trainer runs unchanged on the GPU: an EMA optimizer writes the inference params every step,
// and parameters read back and set from the host on the training stream.
TEST_F(GpuOptimizerDetails, TrainerWithEmaOnAStream) {
  json cfg = {{"loss", {{"otype", "RelativeL2"}}},
              {"optimizer", {{"otype", "EMA"}, {"decay", 0.9}, {"nested", {{"otype", "Adam"}, {"learning_rate", 1e-2}}}}},
              {"network", {{"otype", "PortableMLP"}, {"n_neurons", 64}, {"n_hidden_layers", 1}, {"activation", "ReLU"}}}};
  const tinyfuse::testing::OwnedStream stream;  // outlives the model, which frees memory ordered on it
  Model gpu = create_from_config(8, 4, cfg, {Device::CUDA}, 7);
  Model cpu = create_from_config(8, 4, cfg, {Device::CPU}, 7);
  ASSERT_EQ(gpu.trainer->params_host(), cpu.trainer->params_host());
  const int64_t batch = 512;
  Pcg32 rng(2);
  std::vector<float> x(batch * 8), y(batch * 4);
  const DType in_t = gpu.network->input_dtype();
  Buffer xb(Device::CUDA, x.size() * dtype_size(in_t)), yb(Device::CUDA, y.size() * 4);
  for (int s = 0; s < 10; ++s) {
    for (auto& v : x) v = rng.next_float() * 2 - 1;
    for (size_t i = 0; i < y.size(); ++i) y[i] = 0.5f + 0.25f * std::sin(3.0f * x[i % x.size()]);
    copy_tensor(xb.matrix(in_t, batch, 8, stream), TensorView::matrix(x.data(), batch, 8));
    copy_tensor(yb.matrix(DType::F32, batch, 4, stream), TensorView::matrix(y.data(), batch, 4));
    const float lg = gpu.trainer->training_step(xb.matrix(in_t, batch, 8, stream), yb.matrix(DType::F32, batch, 4, stream));
    const float lc = cpu.trainer->training_step(TensorView::matrix(x.data(), batch, 8), TensorView::matrix(y.data(), batch, 4));
    ASSERT_NEAR(lg, lc, 1e-3 * std::abs(lc)) << "step " << s;
  }
  EXPECT_LE(max_rel_diff(gpu.trainer->params_host(), cpu.trainer->params_host()), 1e-4);
  synchronize(Device::CUDA, stream);  // the views below are read on this thread's default stream
  const std::vector<float> gi = to_host(gpu.trainer->inference_params());
  std::vector<float> ci(cpu.trainer->model().n_params());
  copy_tensor(TensorView::vector(ci.data(), static_cast<int64_t>(ci.size())), cpu.trainer->inference_params());
  EXPECT_LE(max_rel_diff(gi, ci), 1e-4) << "EMA inference params";
  EXPECT_NE(gi, to_host(gpu.trainer->params())) << "inference params are the average, not the trained params";
  std::vector<float> p = gpu.trainer->params_host();
  for (auto& v : p) v *= 0.5f;
  gpu.trainer->set_params_host(p);
  EXPECT_EQ(gpu.trainer->params_host(), p);
}

}  // namespace
