// One conformance suite for every network otype on every device this build has (the otype table,
// core/otypes.h, says which), through the public API: whatever the backend, a network
//  - overwrites every element of its outputs, input gradients and (Overwrite) parameter gradients
//    (all poisoned with NaN first), at odd, small and large batches and several widths;
//  - gives the same bits from inference() as from forward();
//  - gives the same bits when a pass is repeated;
//  - follows the gradient modes: Overwrite writes the gradients, Accumulate adds them (exactly
//    where the backend's sums promise it, else to within the gradient dtype's rounding), Ignore
//    leaves them untouched and still gives the same input gradients; a forward() without an
//    output gives the same gradients;
//  - takes an empty batch: nothing to write, Overwrite zeroes the gradients, Accumulate keeps them.
// Comparisons against a reference (FP64, finite differences) are each network's own suite's.
//
// Compiled into the CPU test binary (CPU in f32 and f64) and, in CUDA builds, into the GPU test
// binary (TINYFUSE_CONFORMANCE_CUDA: the CUDA networks, "skipped: no GPU" without one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/otypes.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

// One network otype on one device, in one precision.
struct Target {
  std::string otype;
  Device device = Device::CPU;
  DType cpu_precision = DType::F32;  // the CPU's compute precision
  std::string precision;             // FullyFusedMLP's "precision" on CUDA ("f16", "bf16"); empty otherwise

  BuildOptions options() const { return {device, cpu_precision}; }
  std::string name() const {
    std::string n = otype + (device == Device::CPU ? "_cpu_" + to_string(cpu_precision) : std::string("_cuda"));
    return precision.empty() ? n : n + "_" + precision;
  }
  // Width64FusedMLP runs inference only (its refusal of forward() is tests/cpu/test_width64_config.cpp's).
  bool trains() const { return otype != "Width64FusedMLP"; }
  // PortableMLP on CUDA sums each gradient in FP32 in a fixed order and adds it once, so
  // Accumulate is exactly one rounded addition of the Overwrite result.
  bool exact_accumulate() const { return otype == "PortableMLP" && device == Device::CUDA; }
};

void PrintTo(const Target& t, std::ostream* os) { *os << t.name(); }

std::vector<Target> targets() {
  std::vector<Target> out;
#ifdef TINYFUSE_CONFORMANCE_CUDA
  const Device device = Device::CUDA;
#else
  const Device device = Device::CPU;
#endif
  for (const OtypeEntry& e : otype_table()) {
    if (e.kind != ObjectKind::Network || e.alias_of || !otype_built_on(e.kind, e.name, device)) continue;
    if (device == Device::CPU) {
      for (DType p : {DType::F32, DType::F64}) out.push_back({e.name, device, p, ""});
    } else if (std::string(e.name) == "FullyFusedMLP") {
      for (const char* p : {"f16", "bf16"}) out.push_back({e.name, device, DType::F32, p});
    } else {
      out.push_back({e.name, device, DType::F32, ""});
    }
  }
  return out;
}

struct Shape {
  uint32_t in, neurons, hidden, out;
  const char* activation;
  const char* output_activation;
};

std::string describe(const Shape& s) {
  return std::to_string(s.in) + " -> " + std::to_string(s.neurons) + " x " + std::to_string(s.hidden) + " -> " +
         std::to_string(s.out) + " (" + s.activation + ", " + s.output_activation + ")";
}

// Several widths each otype's rules allow: odd ones, 64 and 128 wide, depth 0 where allowed,
// output padding (FullyFusedMLP and CutlassMLP pad their output to 16).
std::vector<Shape> shapes(const std::string& otype) {
  if (otype == "Width64FusedMLP") return {{64, 64, 2, 64, "ReLU", "None"}};
  if (otype == "FullyFusedMLP")
    return {{64, 64, 2, 64, "ReLU", "None"}, {32, 16, 1, 5, "Tanh", "Sigmoid"}, {128, 128, 2, 128, "SiLU", "None"},
            {16, 32, 3, 3, "LeakyReLU", "None"}};
  if (otype == "BlasLtMLP" || otype == "BlasLtMLPFP16")  // widths of 16 bytes or more of 16-bit values
    return {{64, 64, 2, 64, "ReLU", "None"}, {16, 32, 1, 8, "Tanh", "Sigmoid"}, {128, 128, 2, 128, "SiLU", "None"}};
  if (otype == "CutlassMLP") return {{64, 64, 2, 64, "ReLU", "None"}, {5, 7, 3, 2, "Tanh", "Sigmoid"}};
  return {{64, 64, 2, 64, "ReLU", "None"},      {3, 7, 3, 5, "Tanh", "Sigmoid"},   {4, 16, 0, 3, "SiLU", "None"},
          {128, 128, 2, 128, "Softplus", "None"}, {70, 130, 1, 65, "ReLU", "Tanh"}};
}

// Batch sizes: one row, an odd one, one past a power of two, and a large odd one (GPU kernels
// cross many tiles and blocks; on the CPU, many parallel chunks and BLAS blocks).
std::vector<int64_t> batches(const Target& t, size_t shape_index) {
  const int64_t large = t.device == Device::CPU ? 4099 : 131075;
  // On the CPU the large batch for the first shape only, to keep the suite quick.
  if (t.device == Device::CPU && shape_index > 0) return {1, 7, 257};
  return {1, 7, 257, large};
}

// ---- tensors on the target's device ------------------------------------------------------------

struct Matrix {
  Buffer buf;
  TensorView view;
};

Matrix matrix(Device device, DType dtype, int64_t rows, int64_t cols, double fill) {
  Matrix m{Buffer(device, std::max<size_t>(static_cast<size_t>(rows * cols) * dtype_size(dtype), 16)), {}};
  m.view = m.buf.matrix(dtype, rows, cols);
  if (rows * cols > 0) fill_tensor(m.view, fill);
  return m;
}

// Values in [lo, hi), as the tensor's dtype rounds them.
Matrix random_matrix(Device device, DType dtype, int64_t rows, int64_t cols, Pcg32& rng, double lo = -1, double hi = 1) {
  std::vector<double> host(static_cast<size_t>(rows * cols));
  for (double& v : host) v = lo + (hi - lo) * rng.next_float();
  Matrix m = matrix(device, dtype, rows, cols, 0.0);
  if (!host.empty()) copy_tensor(m.view, TensorView::matrix(host.data(), rows, cols));
  return m;
}

// Every element as a double (exact for every dtype, so equal doubles mean equal bits but for the
// sign of zero, which the comparison below also checks).
std::vector<double> values(const TensorView& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) copy_tensor(TensorView::matrix(out.data(), t.rows(), t.cols()), t);
  return out;
}

::testing::AssertionResult all_finite(const std::vector<double>& v, const char* what) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return ::testing::AssertionFailure() << what << " element " << i << " is " << v[i] << " (not written?)";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_bits(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << what << ": sizes " << a.size() << " and " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << what << " element " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

// |got - want| <= tolerance * scale per element (scale: the largest magnitude involved).
::testing::AssertionResult close(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                                 const char* what) {
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tolerance * scale))
      return ::testing::AssertionFailure() << what << " element " << i << ": " << got[i] << ", expected " << want[i]
                                           << " (tolerance " << tolerance << " x " << scale << ")";
  return ::testing::AssertionSuccess();
}

// One rounding of a sum of two values in `dtype`, relative to the larger.
double rounding_tolerance(DType dtype) {
  switch (dtype) {
    case DType::F64: return 1e-12;
    case DType::F32: return 1e-6;
    case DType::F16: return 4e-3;
    case DType::BF16: return 3.2e-2;
  }
  return 0;
}

// A network of the target with initialised parameters and a gradient buffer, and its operands.
struct Net {
  std::unique_ptr<Network> net;
  Buffer params, grads;
  TensorView grad_view;

  Net(const Target& t, const Shape& s, uint64_t seed) {
    json cfg = {{"otype", t.otype},          {"n_neurons", s.neurons},
                {"n_hidden_layers", s.hidden}, {"activation", s.activation},
                {"output_activation", s.output_activation}};
    if (!t.precision.empty()) cfg["precision"] = t.precision;
    net = create_network(cfg, s.in, s.out, t.options());
    const size_t n = net->n_params();
    const DType p = net->param_dtype();
    params = Buffer(t.device, std::max<size_t>(n * dtype_size(p), 16));
    grads = Buffer(t.device, std::max<size_t>(n * dtype_size(p), 16));
    std::vector<float> init(n);
    Pcg32 rng(seed);
    net->initialize_params(rng, init.data(), 1.0f);
    const TensorView pv = params.vector(p, static_cast<int64_t>(n));
    if (n > 0) copy_tensor(pv, TensorView::vector(init.data(), static_cast<int64_t>(n)));
    grad_view = grads.vector(p, static_cast<int64_t>(n));
    net->set_params(pv, pv, grad_view);
  }

  DType io() const { return net->input_dtype(); }
  Device device() const { return net->device(); }
  Matrix input(int64_t batch, Pcg32& rng) const { return random_matrix(device(), io(), batch, net->input_width(), rng); }
  Matrix output(int64_t batch) const { return matrix(device(), net->output_dtype(), batch, net->padded_output_width(), NAN); }
  Matrix output_gradient(int64_t batch, Pcg32& rng) const {
    return random_matrix(device(), net->output_dtype(), batch, net->padded_output_width(), rng);
  }
  Matrix input_gradient(int64_t batch) const { return matrix(device(), io(), batch, net->input_width(), NAN); }
  void fill_grads(double v) const {
    if (grad_view.numel() > 0) fill_tensor(grad_view, v);
  }
  std::vector<double> gradients() const { return values(grad_view); }
};

class NetworkConformance : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override {
    if (GetParam().device != Device::CPU && gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }

  // Calls fn(net, shape, batch) for every shape and batch of the target, traced.
  template <typename Fn>
  void for_each_case(Fn&& fn) {
    const Target& t = GetParam();
    const std::vector<Shape> all = shapes(t.otype);
    for (size_t si = 0; si < all.size(); ++si)
      for (int64_t batch : batches(t, si)) {
        SCOPED_TRACE(t.name() + " " + describe(all[si]) + " batch " + std::to_string(batch));
        Net net(t, all[si], 1000 + si);
        fn(net, all[si], batch);
        if (::testing::Test::HasFatalFailure()) return;
      }
  }
};

TEST_P(NetworkConformance, PoisonedOutputsAreOverwritten) {
  for_each_case([&](Net& n, const Shape&, int64_t batch) {
    Pcg32 rng(7 + batch);
    Matrix x = n.input(batch, rng), y = n.output(batch);
    n.net->inference(x.view, y.view);
    ASSERT_TRUE(all_finite(values(y.view), "inference output"));
    if (!GetParam().trains()) return;
    Matrix yf = n.output(batch), dy = n.output_gradient(batch, rng), dx = n.input_gradient(batch);
    auto ctx = n.net->forward(x.view, &yf.view);
    ASSERT_TRUE(all_finite(values(yf.view), "forward output"));
    n.fill_grads(NAN);
    n.net->backward(*ctx, x.view, yf.view, dy.view, &dx.view, false, GradientMode::Overwrite);
    ASSERT_TRUE(all_finite(values(dx.view), "dL_dinput"));
    ASSERT_TRUE(all_finite(n.gradients(), "parameter gradient"));
    // Without dL_dinput (some networks then take another path for the parameter gradients).
    n.fill_grads(NAN);
    n.net->backward(*ctx, x.view, yf.view, dy.view, nullptr, false, GradientMode::Overwrite);
    ASSERT_TRUE(all_finite(n.gradients(), "parameter gradient (no dL_dinput)"));
  });
}

TEST_P(NetworkConformance, InferenceEqualsForward) {
  if (!GetParam().trains()) GTEST_SKIP() << GetParam().otype << " runs inference only";
  for_each_case([&](Net& n, const Shape&, int64_t batch) {
    Pcg32 rng(11 + batch);
    Matrix x = n.input(batch, rng), yi = n.output(batch), yf = n.output(batch), yp = n.output(batch);
    n.net->inference(x.view, yi.view);
    auto ctx = n.net->forward(x.view, &yf.view);
    EXPECT_TRUE(same_bits(values(yi.view), values(yf.view), "inference vs forward output"));
    // forward() with use_inference_params reads the same weights here (set_params gave one buffer).
    auto ctx2 = n.net->forward(x.view, &yp.view, /*use_inference_params=*/true);
    EXPECT_TRUE(same_bits(values(yi.view), values(yp.view), "inference vs forward(use_inference_params)"));
  });
}

TEST_P(NetworkConformance, RepeatsAreBitwiseIdentical) {
  const bool trains = GetParam().trains();
  for_each_case([&](Net& n, const Shape&, int64_t batch) {
    Pcg32 rng(13 + batch);
    Matrix x = n.input(batch, rng), dy = n.output_gradient(batch, rng);
    std::vector<double> first[4];
    for (int run = 0; run < 3; ++run) {
      Matrix yi = n.output(batch), yf = n.output(batch), dx = n.input_gradient(batch);
      n.net->inference(x.view, yi.view);
      std::vector<double> now[4] = {values(yi.view)};
      if (trains) {
        n.fill_grads(NAN);
        auto ctx = n.net->forward(x.view, &yf.view);
        n.net->backward(*ctx, x.view, yf.view, dy.view, &dx.view, false, GradientMode::Overwrite);
        now[1] = values(yf.view);
        now[2] = values(dx.view);
        now[3] = n.gradients();
      }
      if (run == 0) {
        for (int k = 0; k < 4; ++k) first[k] = now[k];
        continue;
      }
      const char* names[4] = {"inference output", "forward output", "dL_dinput", "parameter gradients"};
      for (int k = 0; k < 4; ++k) ASSERT_TRUE(same_bits(first[k], now[k], names[k])) << "run " << run;
    }
  });
}

TEST_P(NetworkConformance, GradientModes) {
  const Target& t = GetParam();
  if (!t.trains()) GTEST_SKIP() << t.otype << " runs inference only";
  for_each_case([&](Net& n, const Shape&, int64_t batch) {
    Pcg32 rng(17 + batch);
    Matrix x = n.input(batch, rng), y = n.output(batch), dy = n.output_gradient(batch, rng);
    auto ctx = n.net->forward(x.view, &y.view);
    const DType gdt = n.net->param_dtype();
    const size_t np = n.net->n_params();
    // With dL_dinput and without: networks may form parameter gradients another way without it.
    for (bool with_dx : {true, false}) {
      SCOPED_TRACE(with_dx ? "with dL_dinput" : "without dL_dinput");
      Matrix dx1 = n.input_gradient(batch), dx2 = n.input_gradient(batch), dx3 = n.input_gradient(batch);
      auto dx = [&](Matrix& m) { return with_dx ? &m.view : nullptr; };

      n.fill_grads(NAN);
      n.net->backward(*ctx, x.view, y.view, dy.view, dx(dx1), false, GradientMode::Overwrite);
      const std::vector<double> once = n.gradients();
      ASSERT_TRUE(all_finite(once, "Overwrite gradient"));

      // Accumulate adds the same gradient once more.
      n.net->backward(*ctx, x.view, y.view, dy.view, dx(dx2), false, GradientMode::Accumulate);
      std::vector<double> twice_want(np);
      for (size_t i = 0; i < np; ++i) twice_want[i] = 2 * once[i];
      if (t.exact_accumulate()) EXPECT_TRUE(same_bits(n.gradients(), twice_want, "Accumulate onto itself"));
      else EXPECT_TRUE(close(n.gradients(), twice_want, rounding_tolerance(gdt), "Accumulate onto itself"));
      if (with_dx) EXPECT_TRUE(same_bits(values(dx2.view), values(dx1.view), "dL_dinput (Accumulate vs Overwrite)"));

      // Accumulate onto arbitrary values: each element becomes (the dtype's rounding of) g0 + g.
      if (np > 0) {
        Matrix g0 = random_matrix(n.device(), gdt, static_cast<int64_t>(np), 1, rng, -3, 3);
        const std::vector<double> g0v = values(g0.view);
        copy_tensor(n.grad_view, g0.view);
        n.net->backward(*ctx, x.view, y.view, dy.view, dx(dx2), false, GradientMode::Accumulate);
        std::vector<double> sum_want(np);
        for (size_t i = 0; i < np; ++i) sum_want[i] = g0v[i] + once[i];
        if (t.exact_accumulate()) {
          for (size_t i = 0; i < np; ++i) sum_want[i] = static_cast<float>(static_cast<float>(g0v[i]) + static_cast<float>(once[i]));
          EXPECT_TRUE(same_bits(n.gradients(), sum_want, "Accumulate onto other values"));
        } else {
          EXPECT_TRUE(close(n.gradients(), sum_want, rounding_tolerance(gdt), "Accumulate onto other values"));
        }
      }

      // Ignore leaves the gradients alone and still gives the input gradients.
      n.fill_grads(123.0);
      n.net->backward(*ctx, x.view, y.view, dy.view, dx(dx3), false, GradientMode::Ignore);
      for (double g : n.gradients()) ASSERT_EQ(g, 123.0) << "Ignore wrote a parameter gradient";
      if (with_dx) EXPECT_TRUE(same_bits(values(dx3.view), values(dx1.view), "dL_dinput (Ignore vs Overwrite)"));

      // Overwrite again, over poison: the same bits.
      n.fill_grads(NAN);
      n.net->backward(*ctx, x.view, y.view, dy.view, dx(dx3), false, GradientMode::Overwrite);
      EXPECT_TRUE(same_bits(n.gradients(), once, "Overwrite repeated"));

      // A context from a forward() without an output gives the same gradients.
      auto ctx_only = n.net->forward(x.view, nullptr);
      n.fill_grads(NAN);
      n.net->backward(*ctx_only, x.view, y.view, dy.view, dx(dx3), false, GradientMode::Overwrite);
      EXPECT_TRUE(same_bits(n.gradients(), once, "Overwrite after forward() without output"));
      if (with_dx) EXPECT_TRUE(same_bits(values(dx3.view), values(dx1.view), "dL_dinput after forward() without output"));
    }
  });
}

TEST_P(NetworkConformance, EmptyBatch) {
  const Target& t = GetParam();
  for (const Shape& s : shapes(t.otype)) {
    SCOPED_TRACE(t.name() + " " + describe(s));
    Net n(t, s, 3);
    Pcg32 rng(3);
    Matrix x = n.input(0, rng), y = n.output(0), dy = n.output_gradient(0, rng), dx = n.input_gradient(0);
    ASSERT_NO_THROW(n.net->inference(x.view, y.view));
    if (!t.trains()) continue;
    auto ctx = n.net->forward(x.view, &y.view);
    n.fill_grads(5.0);
    n.net->backward(*ctx, x.view, y.view, dy.view, &dx.view, false, GradientMode::Accumulate);
    for (double g : n.gradients()) ASSERT_EQ(g, 5.0) << "accumulating an empty batch adds nothing";
    n.fill_grads(NAN);
    n.net->backward(*ctx, x.view, y.view, dy.view, &dx.view, false, GradientMode::Overwrite);
    for (double g : n.gradients()) ASSERT_EQ(g, 0.0) << "overwriting with an empty batch zeroes";
    n.fill_grads(5.0);
    n.net->backward(*ctx, x.view, y.view, dy.view, &dx.view, false, GradientMode::Ignore);
    for (double g : n.gradients()) ASSERT_EQ(g, 5.0) << "Ignore with an empty batch writes nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(AllNetworks, NetworkConformance, ::testing::ValuesIn(targets()),
                         [](const ::testing::TestParamInfo<Target>& info) { return info.param.name(); });

}  // namespace
