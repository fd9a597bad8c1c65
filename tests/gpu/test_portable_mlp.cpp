// PortableMLP on CUDA against the CPU FP64 reference (same FP32 parameters and inputs, widened):
// forward, inference, input and parameter gradients for several shapes, every activation (hidden
// and output) and batch sizes around the kernels' tile edges, with every output poisoned (NaN)
// first so an unwritten element fails; strided views, inference parameters and the argument
// checks (gradient modes, batch 0 and bitwise repeatability are the conformance suite's,
// tests/conformance/). Runs on the device machine; skips without a GPU.
//
// Tolerance: relative L2 error <= 1e-5 per output, per input-gradient matrix and per parameter
// segment (each W_l and b_l on its own). ReLU and LeakyReLU have a kink at 0 where FP32 and FP64
// may take different sides for a pre-activation within rounding of 0, which changes that
// element's derivative by O(1); input rows with a pre-activation that close to a kink are redrawn
// (see avoid_kinks) so the comparison measures the kernels, not that discontinuity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

const BuildOptions kGpu{Device::CUDA};
const BuildOptions kF64{Device::CPU, DType::F64};
constexpr double kTolerance = 1e-5;
constexpr double kKinkMargin = 2e-4;

const std::vector<std::string> kActivations = {"None", "ReLU",    "LeakyReLU",  "SiLU",     "Exponential",
                                               "Sine", "Sigmoid", "Squareplus", "Softplus", "Tanh"};

struct Shape {
  const char* name;
  uint32_t in, neurons, hidden, out;
};

// 64-wide benchmark shape, odd widths, depth 0, 128 wide (two column tiles), and widths that end
// inside a tile everywhere (row tiles of 64 columns, k slices of 16).
const Shape kShapes[] = {
    {"w64", 64, 64, 2, 64}, {"odd", 3, 7, 3, 5}, {"depth0", 4, 16, 0, 3}, {"w128", 128, 128, 2, 128}, {"ragged", 70, 130, 1, 65},
};

const int64_t kBatches[] = {1, 16, 17, 255, 256, 257, 1000};

json mlp_config(uint32_t neurons, uint32_t hidden, const std::string& act, const std::string& out_act) {
  return {{"otype", "PortableMLP"}, {"n_neurons", neurons}, {"n_hidden_layers", hidden}, {"activation", act}, {"output_activation", out_act}};
}

class PortableMlpGpu : public ::testing::Test {
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

DevMatrix dev_matrix(int64_t rows, int64_t cols, double fill = NAN) {
  DevMatrix m{Buffer(Device::CUDA, std::max<size_t>(static_cast<size_t>(rows * cols) * sizeof(float), 4)), {}};
  m.view = m.buf.matrix(DType::F32, rows, cols);
  fill_tensor(m.view, fill);
  return m;
}

DevMatrix upload(const std::vector<double>& host, int64_t rows, int64_t cols) {
  DevMatrix m = dev_matrix(rows, cols);
  copy_tensor(m.view, TensorView::matrix(const_cast<double*>(host.data()), rows, cols));
  return m;
}

std::vector<double> download(const TensorView& v) {
  std::vector<double> h(static_cast<size_t>(v.rows() * v.cols()));
  copy_tensor(TensorView::matrix(h.data(), v.rows(), v.cols()), v);
  return h;
}

std::vector<float> download_f32(const TensorView& v) {
  std::vector<float> h(static_cast<size_t>(v.rows() * v.cols()));
  copy_tensor(TensorView::matrix(h.data(), v.rows(), v.cols()), v);
  return h;
}

// ||a - b|| / ||b|| (||a|| when b is exactly zero); NaN anywhere in a gives NaN, which fails.
double rel_l2(const double* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}
double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  return rel_l2(a.data(), b.data(), std::min(a.size(), b.size()));
}

// Random values in [lo, hi) that are exactly representable in FP32 (both sides see the same data).
std::vector<double> random_f32_values(Pcg32& rng, size_t n, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.next_double());
  return v;
}

bool has_kink(const std::string& act) { return act == "ReLU" || act == "LeakyReLU"; }

// Redraws input rows for which some pre-activation feeding a ReLU/LeakyReLU lies within
// kKinkMargin of 0 in the FP64 reference. z_l is the output of the first l+1 layers built as a
// network of their own with output activation None (their parameters are a prefix of the layout).
void avoid_kinks(const Shape& s, const std::string& act, const std::string& out_act, const std::vector<double>& params,
                 std::vector<double>& x, int64_t batch, Pcg32& rng) {
  const bool hidden_kink = has_kink(act), output_kink = has_kink(out_act);
  if (!hidden_kink && !output_kink) return;
  for (int round = 0; round < 100; ++round) {
    std::vector<char> bad(static_cast<size_t>(batch), 0);
    bool any = false;
    for (uint32_t l = 0; l <= s.hidden; ++l) {
      const bool last = l == s.hidden;
      if (last ? !output_kink : !hidden_kink) continue;
      const uint32_t width = last ? s.out : s.neurons;
      auto prefix_net = create_network(mlp_config(s.neurons, l, act, "None"), s.in, width, kF64);
      std::vector<double> prefix(params.begin(), params.begin() + static_cast<int64_t>(prefix_net->n_params()));
      auto pv = TensorView::vector(prefix.data(), static_cast<int64_t>(prefix.size()));
      prefix_net->set_params(pv, pv, TensorView{});
      std::vector<double> z(static_cast<size_t>(batch) * width);
      prefix_net->inference(TensorView::matrix(x.data(), batch, s.in), TensorView::matrix(z.data(), batch, width));
      for (int64_t b = 0; b < batch; ++b)
        for (uint32_t j = 0; j < width; ++j)
          if (std::abs(z[b * width + j]) < kKinkMargin) bad[b] = 1, any = true;
    }
    if (!any) return;
    for (int64_t b = 0; b < batch; ++b)
      if (bad[b])
        for (uint32_t d = 0; d < s.in; ++d) x[b * s.in + d] = static_cast<float>(2 * rng.next_double() - 1);
  }
  ADD_FAILURE() << "could not draw inputs away from the activation kinks";
}

// --- one network on both devices ---------------------------------------------------------------

struct Pair {
  Shape shape;
  std::string act, out_act;
  std::unique_ptr<Network> gpu, ref;
  std::vector<float> p32;
  std::vector<double> p64, g64;
  DevMatrix params, grads;

  Pair(const Shape& s, const std::string& a, const std::string& oa, Pcg32& rng, float scale = 1.0f)
      : shape(s), act(a), out_act(oa) {
    json cfg = mlp_config(s.neurons, s.hidden, a, oa);
    gpu = create_network(cfg, s.in, s.out, kGpu);
    ref = create_network(cfg, s.in, s.out, kF64);
    const size_t n = gpu->n_params();
    p32.resize(n);
    gpu->initialize_params(rng, p32.data(), scale);
    // Biases start at zero; random ones exercise the bias paths.
    for (const auto& seg : gpu->param_segments())
      if (seg.kind == ParamSegment::Kind::Vector)
        for (size_t i = 0; i < seg.count; ++i) p32[seg.offset + i] = static_cast<float>(0.2 * (2 * rng.next_double() - 1));
    p64.assign(p32.begin(), p32.end());
    g64.assign(n, 0.0);
    params = dev_matrix(static_cast<int64_t>(n), 1);
    copy_tensor(params.view, TensorView::matrix(p32.data(), static_cast<int64_t>(n), 1));
    grads = dev_matrix(static_cast<int64_t>(n), 1);
    const TensorView pv = params.buf.vector(DType::F32, static_cast<int64_t>(n));
    gpu->set_params(pv, pv, grads.buf.vector(DType::F32, static_cast<int64_t>(n)));
    auto rv = TensorView::vector(p64.data(), static_cast<int64_t>(n));
    ref->set_params(rv, rv, TensorView::vector(g64.data(), static_cast<int64_t>(n)));
  }
};

// Forward, inference, backward (Overwrite, input gradients) on both devices; compares everything.
void check_against_reference(const Shape& s, const std::string& act, const std::string& out_act, int64_t batch,
                             uint64_t seed) {
  SCOPED_TRACE(std::string(s.name) + " " + act + " -> " + out_act + ", batch " + std::to_string(batch));
  Pcg32 rng(seed);
  // Stacked exponentials grow doubly exponentially: start them smaller (as the CPU tests do).
  const float scale = act == "Exponential" ? 0.3f : 1.0f;
  Pair net(s, act, out_act, rng, scale);
  std::vector<double> x = random_f32_values(rng, static_cast<size_t>(batch) * s.in);
  avoid_kinks(s, act, out_act, net.p64, x, batch, rng);
  const std::vector<double> dy = random_f32_values(rng, static_cast<size_t>(batch) * s.out);

  // Reference.
  std::vector<double> y_ref(static_cast<size_t>(batch) * s.out), dx_ref(static_cast<size_t>(batch) * s.in);
  {
    auto xv = TensorView::matrix(x.data(), batch, s.in);
    auto yv = TensorView::matrix(y_ref.data(), batch, s.out);
    auto ctx = net.ref->forward(xv, &yv);
    auto dyv = TensorView::matrix(const_cast<double*>(dy.data()), batch, s.out);
    auto dxv = TensorView::matrix(dx_ref.data(), batch, s.in);
    net.ref->backward(*ctx, xv, yv, dyv, &dxv, false, GradientMode::Overwrite);
  }

  // GPU.
  DevMatrix xd = upload(x, batch, s.in), dyd = upload(dy, batch, s.out);
  DevMatrix yd = dev_matrix(batch, s.out), yi = dev_matrix(batch, s.out), dxd = dev_matrix(batch, s.in);
  auto ctx = net.gpu->forward(xd.view, &yd.view);
  net.gpu->inference(xd.view, yi.view);
  net.gpu->backward(*ctx, xd.view, yd.view, dyd.view, &dxd.view, false, GradientMode::Overwrite);

  EXPECT_LE(rel_l2(download(yd.view), y_ref), kTolerance) << "forward output";
  EXPECT_LE(rel_l2(download(yi.view), y_ref), kTolerance) << "inference output";
  EXPECT_LE(rel_l2(download(dxd.view), dx_ref), kTolerance) << "input gradients";
  const std::vector<double> g = download(net.grads.view);
  size_t si = 0;
  for (const auto& seg : net.gpu->param_segments()) {
    EXPECT_LE(rel_l2(g.data() + seg.offset, net.g64.data() + seg.offset, seg.count), kTolerance)
        << "parameter gradient segment " << si << (seg.kind == ParamSegment::Kind::Vector ? " (bias)" : " (weights)");
    ++si;
  }
}

// --- agreement with the reference --------------------------------------------------------------

class PortableMlpActivations : public PortableMlpGpu, public ::testing::WithParamInterface<std::string> {};

TEST_P(PortableMlpActivations, MatchReferenceAtEveryShapeAndBatch) {
  const std::string act = GetParam();
  uint64_t seed = 1;
  for (const Shape& s : kShapes)
    for (int64_t batch : kBatches) {
      check_against_reference(s, act, "None", batch, seed++);  // as the hidden activation
      check_against_reference(s, "Tanh", act, batch, seed++);  // as the output activation
      if (HasFailure()) return;                                // one broken case is enough to read
    }
}

INSTANTIATE_TEST_SUITE_P(All, PortableMlpActivations, ::testing::ValuesIn(kActivations),
                         [](const auto& info) { return info.param; });

TEST_F(PortableMlpGpu, MatchesReferenceAtLargeBatch) {
  // 65536 rows: many row tiles, and weight gradients summed over 512 batch chunks.
  const std::pair<const char*, const char*> acts[] = {{"ReLU", "None"}, {"Sine", "LeakyReLU"}, {"SiLU", "Sigmoid"}};
  uint64_t seed = 100;
  for (const Shape& s : kShapes)
    for (const auto& [act, out_act] : acts) check_against_reference(s, act, out_act, 65536, seed++);
}

TEST_F(PortableMlpGpu, InitializationMatchesCpu) {
  for (const Shape& s : kShapes)
    for (const char* act : {"ReLU", "Sine"}) {
      json cfg = mlp_config(s.neurons, s.hidden, act, "None");
      auto gpu = create_network(cfg, s.in, s.out, kGpu);
      auto cpu = create_network(cfg, s.in, s.out);
      ASSERT_EQ(gpu->n_params(), cpu->n_params());
      std::vector<float> a(gpu->n_params()), b(cpu->n_params());
      Pcg32 ra(9), rb(9);
      gpu->initialize_params(ra, a.data(), 0.5f);
      cpu->initialize_params(rb, b.data(), 0.5f);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << s.name << " " << act;
      const auto sa = gpu->param_segments(), sb = cpu->param_segments();
      ASSERT_EQ(sa.size(), sb.size());
      for (size_t i = 0; i < sa.size(); ++i) {
        EXPECT_EQ(sa[i].offset, sb[i].offset);
        EXPECT_EQ(sa[i].count, sb[i].count);
        EXPECT_EQ(sa[i].kind, sb[i].kind);
      }
    }
}

TEST_F(PortableMlpGpu, StridedViewsMatchDenseAndStayInTheirColumns) {
  for (int64_t batch : {1, 257, 5000})
    for (const char* out_act : {"None", "Tanh"}) {
      const Shape s = kShapes[1];  // 3 -> 7 x 3 -> 5
      SCOPED_TRACE(std::string(out_act) + " batch " + std::to_string(batch));
      Pcg32 rng(21);
      Pair net(s, "Softplus", out_act, rng);
      const auto x = random_f32_values(rng, static_cast<size_t>(batch) * s.in);
      const auto dy = random_f32_values(rng, static_cast<size_t>(batch) * s.out);

      // Dense run.
      DevMatrix xd = upload(x, batch, s.in), dyd = upload(dy, batch, s.out);
      DevMatrix yd = dev_matrix(batch, s.out), yi = dev_matrix(batch, s.out), dxd = dev_matrix(batch, s.in);
      auto ctx = net.gpu->forward(xd.view, &yd.view);
      net.gpu->inference(xd.view, yi.view);
      net.gpu->backward(*ctx, xd.view, yd.view, dyd.view, &dxd.view, false, GradientMode::Overwrite);
      const auto g_dense = download_f32(net.grads.view);

      // Every tensor as a column slice of a wider, poisoned matrix.
      const double poison = -7.0;
      DevMatrix xw = dev_matrix(batch, s.in + 5, poison), dyw = dev_matrix(batch, s.out + 3, poison);
      DevMatrix yw = dev_matrix(batch, s.out + 4, poison), yiw = dev_matrix(batch, s.out + 4, poison);
      DevMatrix dxw = dev_matrix(batch, s.in + 2, poison);
      const TensorView xs = xw.view.cols_slice(2, s.in), dys = dyw.view.cols_slice(3, s.out);
      const TensorView ys = yw.view.cols_slice(1, s.out), yis = yiw.view.cols_slice(4, s.out);
      const TensorView dxs = dxw.view.cols_slice(1, s.in);
      copy_tensor(xs, xd.view);
      copy_tensor(dys, dyd.view);
      fill_tensor(net.grads.view, NAN);
      auto ctx_s = net.gpu->forward(xs, &ys);
      net.gpu->inference(xs, yis);
      net.gpu->backward(*ctx_s, xs, ys, dys, &dxs, false, GradientMode::Overwrite);

      auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      };
      EXPECT_TRUE(same(download_f32(ys), download_f32(yd.view))) << "forward output";
      EXPECT_TRUE(same(download_f32(yis), download_f32(yi.view))) << "inference output";
      EXPECT_TRUE(same(download_f32(dxs), download_f32(dxd.view))) << "input gradients";
      EXPECT_TRUE(same(download_f32(net.grads.view), g_dense)) << "parameter gradients";
      // Columns outside the views are untouched.
      auto outside_untouched = [&](const DevMatrix& m, int64_t begin, int64_t count) {
        const auto all = download_f32(m.view);
        const int64_t w = m.view.cols();
        for (int64_t r = 0; r < batch; ++r)
          for (int64_t c = 0; c < w; ++c)
            if ((c < begin || c >= begin + count) && all[r * w + c] != static_cast<float>(poison)) return false;
        return true;
      };
      EXPECT_TRUE(outside_untouched(yw, 1, s.out)) << "forward wrote outside its view";
      EXPECT_TRUE(outside_untouched(yiw, 4, s.out)) << "inference wrote outside its view";
      EXPECT_TRUE(outside_untouched(dxw, 1, s.in)) << "backward wrote outside dL_dinput's view";
    }
}

TEST_F(PortableMlpGpu, InferenceParams) {
  // Separate inference parameters: inference() and forward(use_inference_params) use them, and
  // backward(use_inference_params) propagates input gradients through them.
  const Shape s = kShapes[0];
  const int64_t batch = 300;
  Pcg32 rng(31);
  Pair train(s, "Tanh", "None", rng), infer(s, "Tanh", "None", rng);
  const int64_t n = static_cast<int64_t>(train.gpu->n_params());
  train.gpu->set_params(train.params.buf.vector(DType::F32, n), infer.params.buf.vector(DType::F32, n),
                        train.grads.buf.vector(DType::F32, n));
  const auto x = random_f32_values(rng, static_cast<size_t>(batch) * s.in);
  const auto dy = random_f32_values(rng, static_cast<size_t>(batch) * s.out);
  DevMatrix xd = upload(x, batch, s.in), dyd = upload(dy, batch, s.out);
  DevMatrix y_inf = dev_matrix(batch, s.out), y_fwd = dev_matrix(batch, s.out), y_ref_gpu = dev_matrix(batch, s.out);
  DevMatrix dx = dev_matrix(batch, s.in), dx_ref_gpu = dev_matrix(batch, s.in);
  train.gpu->inference(xd.view, y_inf.view);
  auto ctx = train.gpu->forward(xd.view, &y_fwd.view, true);
  train.gpu->backward(*ctx, xd.view, y_fwd.view, dyd.view, &dx.view, true, GradientMode::Ignore);
  // The network built on the inference parameters alone computes the same thing.
  infer.gpu->inference(xd.view, y_ref_gpu.view);
  auto ctx_ref = infer.gpu->forward(xd.view, nullptr);
  infer.gpu->backward(*ctx_ref, xd.view, y_ref_gpu.view, dyd.view, &dx_ref_gpu.view, false, GradientMode::Ignore);
  const auto a = download_f32(y_inf.view), b = download_f32(y_fwd.view), c = download_f32(y_ref_gpu.view);
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(b.data(), c.data(), b.size() * sizeof(float)));
  const auto d = download_f32(dx.view), e = download_f32(dx_ref_gpu.view);
  EXPECT_EQ(0, std::memcmp(d.data(), e.data(), d.size() * sizeof(float)));
}

TEST_F(PortableMlpGpu, RejectsBadArgumentsWithClearErrors) {
  const Shape s = kShapes[1];
  json cfg = mlp_config(s.neurons, s.hidden, "ReLU", "None");
  auto net = create_network(cfg, s.in, s.out, kGpu);
  const int64_t n = static_cast<int64_t>(net->n_params());
  DevMatrix x = dev_matrix(10, s.in, 0.5), y = dev_matrix(10, s.out);

  try {
    net->inference(x.view, y.view);
    FAIL() << "expected an error without parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_params"), std::string::npos) << e.what();
  }

  DevMatrix params = dev_matrix(n, 1, 0.1), grads = dev_matrix(n, 1, 0.0);
  std::vector<float> host_params(static_cast<size_t>(n), 0.1f);
  EXPECT_THROW(net->set_params(TensorView::vector(host_params.data(), n), TensorView::vector(host_params.data(), n), TensorView{}),
               ShapeError);
  EXPECT_THROW(net->set_params(params.buf.vector(DType::F32, n - 1), params.buf.vector(DType::F32, n - 1), TensorView{}),
               ShapeError);
  DevMatrix params64 = dev_matrix(2 * n, 1);  // room for n doubles
  EXPECT_THROW(net->set_params(params64.buf.vector(DType::F64, n), params64.buf.vector(DType::F64, n), TensorView{}),
               ShapeError);
  const TensorView pv = params.buf.vector(DType::F32, n);
  net->set_params(pv, pv, TensorView{});  // no gradient buffer

  std::vector<float> host_x(10 * s.in), host_y(10 * s.out);
  EXPECT_THROW(net->inference(TensorView::matrix(host_x.data(), 10, s.in), y.view), ShapeError);  // CPU input
  EXPECT_THROW(net->inference(x.view, TensorView::matrix(host_y.data(), 10, s.out)), ShapeError);  // CPU output
  DevMatrix wrong_width = dev_matrix(10, s.in + 1, 0.0), wrong_rows = dev_matrix(9, s.out);
  EXPECT_THROW(net->inference(wrong_width.view, y.view), ShapeError);
  EXPECT_THROW(net->inference(x.view, wrong_rows.view), ShapeError);
  DevMatrix x64 = dev_matrix(20, s.in, 0.0);  // room for 10 x in doubles
  EXPECT_THROW(net->inference(x64.buf.matrix(DType::F64, 10, s.in), y.view), ShapeError);
  DevMatrix wide = dev_matrix(10, 2 * s.in, 0.0);
  TensorView column_strided = wide.view;
  column_strided.shape[1] = s.in;
  column_strided.strides[1] = 2;
  try {
    net->inference(column_strided, y.view);
    FAIL() << "expected a ShapeError for a column stride of 2";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("column stride 1"), std::string::npos) << e.what();
  }

  auto ctx = net->forward(x.view, &y.view);
  DevMatrix dy = dev_matrix(10, s.out, 1.0), dx = dev_matrix(10, s.in);
  EXPECT_THROW(net->backward(*ctx, x.view, y.view, dy.view, &dx.view, false, GradientMode::Overwrite), Error)
      << "gradients requested without a gradient buffer";
  EXPECT_NO_THROW(net->backward(*ctx, x.view, y.view, dy.view, &dx.view, false, GradientMode::Ignore));
  DevMatrix x_other = dev_matrix(11, s.in, 0.0), dy_other = dev_matrix(11, s.out, 0.0), y_other = dev_matrix(11, s.out);
  EXPECT_THROW(net->backward(*ctx, x_other.view, y_other.view, dy_other.view, nullptr, false, GradientMode::Ignore), ShapeError)
      << "batch differs from the forward()";
  EXPECT_THROW(net->backward(*ctx, x.view, y.view, dev_matrix(10, s.out + 1).view, nullptr, false, GradientMode::Ignore),
               ShapeError);
  auto cpu = create_network(cfg, s.in, s.out);
  std::vector<float> cpu_params(static_cast<size_t>(n), 0.1f);
  auto cpv = TensorView::vector(cpu_params.data(), n);
  cpu->set_params(cpv, cpv, TensorView{});
  std::vector<float> cx(10 * s.in, 0.5f), cy(10 * s.out);
  auto cpu_ctx = cpu->forward(TensorView::matrix(cx.data(), 10, s.in), nullptr);
  EXPECT_THROW(net->backward(*cpu_ctx, x.view, y.view, dy.view, nullptr, false, GradientMode::Ignore), Error)
      << "a context from another network";
}

}  // namespace
