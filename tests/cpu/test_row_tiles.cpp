// The row-tile engine (src/cpu/tiles): its small products against an FP64 reference on every
// instruction set this CPU runs, the same bits from each, and whole forward and backward passes
// against an FP64 MLP written out here, over shapes, strides, batches that are not whole tiles
// and the gradient modes. (The engine through the public networks: every MLP test in this binary,
// and the same tests again with TINYFUSE_CPU_ISA=avx2 and =baseline, tests/CMakeLists.txt.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/activation_math.h"
#include "cpu/tiles/row_tiles.h"
#include "cpu/tiles/tile_gemm.h"
#include "testing/mlp_cases.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

std::vector<const cpu::TileGemm*> available_kernels() {
  std::vector<const cpu::TileGemm*> out;
  for (const char* isa : {"avx512f", "avx2"})
    if (const cpu::TileGemm* k = cpu::tile_gemm_for(isa)) out.push_back(k);
  return out;
}

struct Product {
  int64_t m, n, k;
  bool a_transposed;  // A stored (k, m): a_row 1, a_inner m + pad
  bool accumulate;
};

// C of `p` by `kernels` over random A, B and C with padding around every matrix; checks the
// padding of C is untouched and returns C (rows of ldc).
std::vector<float> run_product(const cpu::TileGemm& kernels, const Product& p, std::vector<double>* reference,
                               double* scale) {
  Pcg32 rng(uint64_t(p.m * 1000003 + p.n * 1009 + p.k * 7 + p.a_transposed * 3 + p.accumulate));
  const int64_t a_ld = (p.a_transposed ? p.m : p.k) + 3, ldb = p.n + 5, ldc = p.n + 2;
  const int64_t a_row = p.a_transposed ? 1 : a_ld, a_inner = p.a_transposed ? a_ld : 1;
  std::vector<float> a((p.a_transposed ? p.k : p.m) * a_ld), b(p.k * ldb), c(p.m * ldc);
  for (auto& v : a) v = rng.next_float() - 0.5f;
  for (auto& v : b) v = rng.next_float() - 0.5f;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) c[i * ldc + j] = j < p.n ? (p.accumulate ? rng.next_float() - 0.5f : NAN) : -7.0f;
  reference->assign(p.m * p.n, 0.0);
  *scale = 0;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double s = p.accumulate ? c[i * ldc + j] : 0.0, mag = std::abs(s);
      for (int64_t q = 0; q < p.k; ++q) {
        const double t = double(a[i * a_row + q * a_inner]) * b[q * ldb + j];
        s += t;
        mag += std::abs(t);
      }
      (*reference)[i * p.n + j] = s;
      *scale = std::max(*scale, mag);
    }
  kernels.gemm(p.m, p.n, p.k, a.data(), a_row, a_inner, b.data(), ldb, c.data(), ldc, p.accumulate);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = p.n; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], -7.0f) << "padding of C written at " << i << "," << j;
  return c;
}

std::vector<Product> products() {
  std::vector<Product> out;
  for (const int64_t m : {1, 5, 6, 7, 13, 16, 17, 96, 97})
    for (const int64_t n : {1, 3, 8, 15, 16, 17, 33, 64, 65, 100, 128, 130})
      for (const int64_t k : {1, 3, 64, 97})
        out.push_back({m, n, k, (m + n + k) % 2 == 0, (m * n + k) % 3 == 0});
  return out;
}

TEST(TileGemm, KernelsMatchTheFp64Reference) {
  const auto kernels = available_kernels();
  if (kernels.empty()) GTEST_SKIP() << "skipped: this CPU has neither AVX2 with FMA nor AVX-512";
  for (const cpu::TileGemm* k : kernels)
    for (const Product& p : products()) {
      std::vector<double> ref;
      double scale = 0;
      const std::vector<float> c = run_product(*k, p, &ref, &scale);
      const int64_t ldc = p.n + 2;
      // Each element is a chain of k + 1 roundings of terms at most `scale` in sum.
      const double tol = scale * (p.k + 2) * 6e-8;
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j)
          ASSERT_NEAR(c[i * ldc + j], ref[i * p.n + j], tol)
              << k->isa << " " << p.m << "x" << p.n << "x" << p.k << " transposed A " << p.a_transposed
              << " accumulate " << p.accumulate << " at " << i << "," << j;
    }
}

TEST(TileGemm, EveryInstructionSetGivesTheSameBits) {
  const auto kernels = available_kernels();
  if (kernels.size() < 2) GTEST_SKIP() << "skipped: this CPU runs only " << kernels.size() << " of the kernel sets";
  for (const Product& p : products()) {
    std::vector<double> ref;
    double scale = 0;
    const std::vector<float> first = run_product(*kernels[0], p, &ref, &scale);
    const std::vector<float> second = run_product(*kernels[1], p, &ref, &scale);
    ASSERT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)))
        << p.m << "x" << p.n << "x" << p.k;
  }
}

TEST(TileGemm, TheChosenKernelsAreOnesThisCpuRuns) {
  const cpu::TileGemm* chosen = cpu::tile_gemm();
  if (!chosen) {
    EXPECT_TRUE(available_kernels().empty() || std::getenv("TINYFUSE_CPU_ISA")) << "kernels exist but none chosen";
    return;
  }
  EXPECT_EQ(chosen, cpu::tile_gemm_for(chosen->isa));
}

// A TINYFUSE_CPU_ISA the library does not know is an error naming the accepted values (ctest
// cpu_mlp_engine_bad_isa runs this with one set; elsewhere it skips).
TEST(TileGemm, AnUnknownIsaCapIsAnErrorNamingTheChoices) {
  const char* cap = std::getenv("TINYFUSE_CPU_ISA");
  if (!cap || std::string(cap).empty() || std::string(cap) == "avx512f" || std::string(cap) == "avx2" ||
      std::string(cap) == "baseline")
    GTEST_SKIP() << "skipped: TINYFUSE_CPU_ISA is unset or valid here";
  for (int attempt = 0; attempt < 2; ++attempt) {  // every call says it, not only the first
    try {
      cpu::tile_gemm();
      FAIL() << "no error for TINYFUSE_CPU_ISA=" << cap;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(cap), std::string::npos) << what;
      EXPECT_NE(what.find("avx512f, avx2 or baseline"), std::string::npos) << what;
    }
  }
}

// An MLP in FP64 over the same float weights: y_l = act_l(W_l y_{l-1} + b_l).
struct Net {
  std::vector<uint32_t> widths;  // input, then each layer's output
  std::vector<Activation> acts;
  bool biases;
  std::vector<float> params;
  std::vector<size_t> w_off, b_off;

  Net(std::vector<uint32_t> w, std::vector<Activation> a, bool with_biases, uint64_t seed)
      : widths(std::move(w)), acts(std::move(a)), biases(with_biases) {
    size_t n = 0;
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
      w_off.push_back(n);
      n += size_t{widths[l]} * widths[l + 1];
      b_off.push_back(n);
      if (biases) n += widths[l + 1];
    }
    params.resize(n);
    Pcg32 rng(seed);
    for (auto& v : params) v = rng.uniform(-0.4f, 0.4f);
  }
  size_t n_layers() const { return widths.size() - 1; }
  std::vector<cpu::TiledLayer> layers() const {
    std::vector<cpu::TiledLayer> out;
    for (size_t l = 0; l < n_layers(); ++l)
      out.push_back({widths[l], widths[l + 1], params.data() + w_off[l], biases ? params.data() + b_off[l] : nullptr,
                     acts[l], w_off[l], b_off[l]});
    return out;
  }
};

// Forward and backward of one row in FP64: output, dL/dparams (added to grads) and dL/dinput.
// (mags gathers the sum of each gradient term's magnitude, the scale of its rounding error.)
void reference_row(const Net& net, const float* x, const float* dy_row, std::vector<double>& out,
                   std::vector<double>& grads, std::vector<double>& mags, std::vector<double>& dx) {
  std::vector<std::vector<double>> ys{std::vector<double>(x, x + net.widths[0])}, zs;
  for (size_t l = 0; l < net.n_layers(); ++l) {
    const uint32_t in = net.widths[l], o = net.widths[l + 1];
    std::vector<double> z(o), y(o);
    for (uint32_t j = 0; j < o; ++j) {
      double s = net.biases ? net.params[net.b_off[l] + j] : 0.0;
      for (uint32_t i = 0; i < in; ++i) s += double(net.params[net.w_off[l] + size_t{j} * in + i]) * ys[l][i];
      z[j] = s;
      y[j] = activate(net.acts[l], s);
    }
    zs.push_back(z);
    ys.push_back(y);
  }
  out = ys.back();
  std::vector<double> d(dy_row, dy_row + net.widths.back());
  for (size_t l = net.n_layers(); l-- > 0;) {
    const uint32_t in = net.widths[l], o = net.widths[l + 1];
    std::vector<double> dprev(in, 0.0);
    for (uint32_t j = 0; j < o; ++j) {
      const double dz = d[j] * activate_derivative(net.acts[l], zs[l][j]);
      for (uint32_t i = 0; i < in; ++i) {
        grads[net.w_off[l] + size_t{j} * in + i] += dz * ys[l][i];
        mags[net.w_off[l] + size_t{j} * in + i] += std::abs(dz * ys[l][i]);
        dprev[i] += dz * net.params[net.w_off[l] + size_t{j} * in + i];
      }
      if (net.biases) grads[net.b_off[l] + j] += dz, mags[net.b_off[l] + j] += std::abs(dz);
    }
    d = dprev;
  }
  dx = d;
}

struct PassCase {
  std::vector<uint32_t> widths;
  std::vector<Activation> acts;
  bool biases;
  int64_t batch;
};

TEST(RowTiles, ForwardAndBackwardMatchAnFp64Mlp) {
  const cpu::TileGemm* kernels = cpu::tile_gemm();
  if (!kernels) GTEST_SKIP() << "skipped: the row-tile engine is off on this CPU (or by TINYFUSE_CPU_ISA)";
  using A = Activation;
  const std::vector<PassCase> cases = {
      {{64, 64, 64, 64}, {A::ReLU, A::ReLU, A::None}, false, 1000},
      {{3, 32, 32, 16}, {A::Sine, A::Tanh, A::Sigmoid}, true, 97},
      {{32, 128, 128, 128, 16}, {A::Softplus, A::SiLU, A::LeakyReLU, A::None}, true, 4001},  // > 32 tiles
      {{2, 16, 16}, {A::Squareplus, A::Exponential}, false, 1},
      {{17, 48, 5}, {A::ReLU, A::None}, true, 96},
      {{64, 64, 64}, {A::ReLU, A::None}, true, 0},
  };
  for (const PassCase& pc : cases)
    for (const bool accumulate : {false, true}) {
      const Net net(pc.widths, pc.acts, pc.biases, pc.batch * 7 + pc.widths.size());
      const auto layers = net.layers();
      const uint32_t in = pc.widths.front(), out_w = pc.widths.back();
      const int64_t ldx = in + 3, ldo = out_w + 1, ldi = in + 2, ldy = out_w + 4;
      Pcg32 rng(uint64_t(pc.batch + accumulate));
      std::vector<float> x(std::max<int64_t>(pc.batch, 1) * ldx), dy(std::max<int64_t>(pc.batch, 1) * ldy);
      for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
      for (auto& v : dy) v = rng.uniform(-1.0f, 1.0f);

      // Inference into a poisoned output.
      std::vector<float> out(std::max<int64_t>(pc.batch, 1) * ldo, NAN);
      cpu::tiled_forward(*kernels, layers, x.data(), ldx, pc.batch, nullptr, out.data(), ldo);
      // A training forward keeping every layer's rows, then the backward.
      std::vector<std::vector<float>> z(layers.size()), y(layers.size());
      cpu::LayerRows keep;
      for (size_t l = 0; l < layers.size(); ++l) {
        z[l].assign(pc.batch * layers[l].out + 1, NAN);
        y[l].assign(pc.batch * layers[l].out + 1, NAN);
        keep.z.push_back(z[l].data());
        keep.y.push_back(y[l].data());
      }
      cpu::tiled_forward(*kernels, layers, x.data(), ldx, pc.batch, &keep, nullptr, 0);
      std::vector<float> grads(net.params.size()), dx(std::max<int64_t>(pc.batch, 1) * ldi, NAN);
      for (auto& g : grads) g = accumulate ? rng.uniform(-1.0f, 1.0f) : NAN;
      const std::vector<float> grads_before = grads;
      cpu::tiled_backward(*kernels, layers, x.data(), ldx, pc.batch, keep, dy.data(), ldy, grads.data(), grads.size(),
                          accumulate, dx.data(), ldi);
      // Without parameter gradients (GradientMode::Ignore): dL/dinput alone, the same.
      std::vector<float> dx_only(dx.size(), NAN);
      cpu::tiled_backward(*kernels, layers, x.data(), ldx, pc.batch, keep, dy.data(), ldy, nullptr, 0, false,
                          dx_only.data(), ldi);

      std::vector<double> ref_grads(net.params.size(), 0.0), mags(net.params.size(), 0.0), ref_out, ref_dx;
      const std::string what = "widths " + std::to_string(in) + ".." + std::to_string(out_w) + " batch " +
                               std::to_string(pc.batch) + (accumulate ? " accumulate" : "");
      for (int64_t r = 0; r < pc.batch; ++r) {
        reference_row(net, x.data() + r * ldx, dy.data() + r * ldy, ref_out, ref_grads, mags, ref_dx);
        for (uint32_t j = 0; j < out_w; ++j) {
          ASSERT_NEAR(out[r * ldo + j], ref_out[j], 1e-4 * (1 + std::abs(ref_out[j]))) << what << " output " << r;
          ASSERT_EQ(std::memcmp(&out[r * ldo + j], &y.back()[r * out_w + j], 4), 0) << what << " kept y differs";
        }
        for (uint32_t i = 0; i < in; ++i) {
          ASSERT_NEAR(dx[r * ldi + i], ref_dx[i], 1e-4 * (1 + std::abs(ref_dx[i]))) << what << " dinput " << r;
          ASSERT_EQ(std::memcmp(&dx[r * ldi + i], &dx_only[r * ldi + i], 4), 0) << what;
        }
        for (int64_t j = out_w; j < ldo; ++j) ASSERT_TRUE(std::isnan(out[r * ldo + j])) << what << " output padding";
        for (int64_t i = in; i < ldi; ++i) ASSERT_TRUE(std::isnan(dx[r * ldi + i])) << what << " dinput padding";
      }
      for (size_t l = 0; l < layers.size(); ++l) {  // nothing written past the batch's rows
        ASSERT_TRUE(std::isnan(z[l].back()));
        ASSERT_TRUE(std::isnan(y[l].back()));
      }
      for (size_t p = 0; p < grads.size(); ++p) {
        const double expect = ref_grads[p] + (accumulate ? grads_before[p] : 0.0);
        ASSERT_NEAR(grads[p], expect, 2e-5 * mags[p] + 1e-6 * (1 + std::abs(expect))) << what << " dparams[" << p << "]";
      }
    }
}

// The Trainer's one-pass training (forward, loss and backward a tile at a time) against the two
// calls DifferentiableObject defines it as: the same values and gradients, bit for bit, over
// losses, a data pdf, a padded output, batches that are not whole tiles and both gradient modes.
TEST(RowTiles, OnePassTrainingIsForwardLossBackward) {
  if (!cpu::tile_gemm()) GTEST_SKIP() << "skipped: the row-tile engine is off on this CPU (or by TINYFUSE_CPU_ISA)";
  struct Case {
    const char* otype;
    uint32_t in, out;
    const char* loss;
    bool pdf;
    int64_t batch;
  };
  for (const Case c : {Case{"PortableMLP", 32, 64, "L2", false, 5000}, Case{"CutlassMLP", 3, 3, "RelativeL2", true, 97},
                       Case{"FullyFusedMLP", 16, 1, "L1", false, 1}, Case{"PortableMLP", 2, 6, "RelativeL2Luminance", true, 288}})
    for (const GradientMode mode : {GradientMode::Overwrite, GradientMode::Accumulate}) {
      auto net = create_network(tinyfuse::testing::net_config(c.otype, 64, 2, "ReLU", "Sigmoid"), c.in, c.out);
      auto loss = create_loss({{"otype", c.loss}});
      const size_t n = net->n_params();
      const int64_t w = net->padded_output_width();
      Pcg32 rng(uint64_t(c.batch + c.in));
      std::vector<float> params(n), input(c.batch * c.in), target(c.batch * c.out), pdf(c.batch * c.out);
      net->initialize_params(rng, params.data());
      for (auto& v : input) v = rng.uniform(-1.0f, 1.0f);
      for (auto& v : target) v = rng.next_float();
      for (auto& v : pdf) v = rng.uniform(0.5f, 2.0f);
      std::vector<float> grads[2], values[2], start(n);
      for (auto& v : start) v = rng.uniform(-1.0f, 1.0f);
      for (int path = 0; path < 2; ++path) {
        grads[path] = mode == GradientMode::Accumulate ? start : std::vector<float>(n, NAN);
        values[path].assign(c.batch, NAN);
        std::vector<float> output(c.batch * w, NAN), dloss(c.batch * w, NAN);
        net->set_params(TensorView::vector(params.data(), n), TensorView::vector(params.data(), n),
                        TensorView::vector(grads[path].data(), n));
        const TensorView x = TensorView::matrix(input.data(), c.batch, c.in);
        const TensorView out = TensorView::matrix(output.data(), c.batch, w);
        const TensorView t = TensorView::matrix(target.data(), c.batch, c.out);
        const TensorView v = TensorView::matrix(values[path].data(), c.batch, 1);
        const TensorView g = TensorView::matrix(dloss.data(), c.batch, w);
        const TensorView p = TensorView::matrix(pdf.data(), c.batch, c.out);
        if (path == 0)
          net->forward_backward_with_loss(x, out, *loss, 128.0f, t, v, g, c.pdf ? &p : nullptr, mode);
        else
          net->DifferentiableObject::forward_backward_with_loss(x, out, *loss, 128.0f, t, v, g, c.pdf ? &p : nullptr,
                                                                mode);
      }
      const std::string what = std::string(c.otype) + " " + c.loss + " batch " + std::to_string(c.batch);
      ASSERT_EQ(0, std::memcmp(values[0].data(), values[1].data(), values[0].size() * 4)) << what << " values";
      ASSERT_EQ(0, std::memcmp(grads[0].data(), grads[1].data(), n * 4)) << what << " gradients";
      for (const float gr : grads[0]) ASSERT_TRUE(std::isfinite(gr)) << what;
    }
}

}  // namespace
