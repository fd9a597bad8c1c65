// Qualification of every GPU network against the CPU FP64 reference, through the public API
// only: fresh random inputs, poisoned outputs, forward / inference / input and parameter
// gradients over the batch sizes the brief names, bitwise repeatability, stream isolation,
// parameter hot swap, and a training trajectory against the CPU trainer.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "core/half.h"
#include "testing/gpu_stream.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

struct Case {
  std::string otype;
  uint32_t in, neurons, hidden, out;
  std::string activation, output_activation;
  double tolerance;  // relative L2 vs the FP64 reference: FP32 1e-5, FP16 2e-3 (documented)
};

// Smooth activations only: at 65536 rows some FP32 pre-activation lands within rounding of a
// ReLU kink and takes the other side, which moves that gradient element by a whole dY however
// right the kernels are. The per-network suites (test_portable_mlp.cpp, test_blaslt_mlp.cpp)
// check ReLU with inputs redrawn away from kinks or against FP16-rounded layer-wise references;
// the training trajectories below run ReLU end to end.
const Case kCases[] = {
    {"PortableMLP", 64, 64, 2, 64, "Softplus", "None", 1e-5},
    {"PortableMLP", 3, 7, 3, 5, "Tanh", "Sigmoid", 1e-5},
    {"PortableMLP", 128, 128, 2, 128, "SiLU", "None", 1e-5},
    {"BlasLtMLP", 64, 64, 2, 64, "Softplus", "None", 1e-5},
    {"BlasLtMLP", 128, 128, 2, 128, "Sine", "None", 1e-5},
    // FP16 against the end-to-end FP64 network: smooth activations only. With ReLU a
    // pre-activation within one FP16 rounding of 0 switches sides and moves a gradient by a whole
    // dY; tests/gpu/test_blaslt_mlp.cpp checks ReLU layer by layer against FP16-rounded storage.
    {"BlasLtMLPFP16", 64, 64, 2, 64, "Tanh", "None", 2e-3},
    {"BlasLtMLPFP16", 128, 128, 2, 128, "SiLU", "None", 2e-3},
    // FullyFusedMLP (FP16, no biases, output padded to 16), likewise; ReLU and every other
    // activation in tests/gpu/test_fully_fused_mlp.cpp.
    {"FullyFusedMLP", 64, 64, 2, 64, "Tanh", "None", 2e-3},
    {"FullyFusedMLP", 128, 128, 2, 128, "SiLU", "None", 2e-3},
};

std::vector<int64_t> batch_sizes() {
  // TINYFUSE_QUICK=1 (the sanitizer runs, which are 10-100x slower) keeps the padding-boundary sizes.
  if (const char* q = std::getenv("TINYFUSE_QUICK"); q && *q == '1') return {1, 17, 255, 257, 1000};
  std::vector<int64_t> b = {1, 16, 17, 255, 256, 257, 1000, 65536};
  Pcg32 rng(2026);  // the 20-size sweep: reproducible, spread over 1 .. 2^17
  for (int i = 0; i < 20; ++i) b.push_back(1 + static_cast<int64_t>(std::exp(rng.next_float() * std::log(131072.0))));
  return b;
}

json config_of(const Case& c, const std::string& otype) {
  return {{"otype", otype}, {"n_neurons", c.neurons}, {"n_hidden_layers", c.hidden},
          {"activation", c.activation}, {"output_activation", c.output_activation}};
}
json config_of(const Case& c) { return config_of(c, c.otype); }
// The CPU reference: PortableMLP has the same layout (weights then bias per layer) as every
// GPU network in kCases with biases; FullyFusedMLP is checked against its own CPU version.
json reference_config_of(const Case& c) { return config_of(c, c.otype == "FullyFusedMLP" ? c.otype : "PortableMLP"); }

// Values as stored in `dtype`, read back as double (what the GPU actually computes with).
std::vector<double> rounded(const std::vector<float>& v, DType dtype) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = dtype == DType::F16 ? half_bits_to_float(float_to_half_bits(v[i])) : v[i];
  return out;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// A GPU network with its parameters and gradients in device buffers.
struct GpuModel {
  std::unique_ptr<Network> net;
  Buffer params, grads;
  GpuModel(const Case& c, const std::vector<float>& host_params) {
    net = create_network(config_of(c), c.in, c.out, {Device::CUDA});
    const DType t = net->param_dtype();
    params = Buffer(Device::CUDA, net->n_params() * dtype_size(t));
    grads = Buffer(Device::CUDA, net->n_params() * dtype_size(t));
    set(host_params);
    net->set_params(pview(), pview(), grads.vector(t, net->n_params()));
  }
  TensorView pview() const { return params.vector(net->param_dtype(), net->n_params()); }
  void set(const std::vector<float>& host) {
    copy_tensor(pview(), TensorView::vector(const_cast<float*>(host.data()), host.size()));
  }
};

std::vector<double> to_host(const TensorView& t) {
  std::vector<double> out(t.numel());
  copy_tensor(TensorView::matrix(out.data(), t.rows(), t.cols()), t);
  return out;
}

class Qualification : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(Qualification, MatchesCpuFp64ReferenceAtEveryBatchSize) {
  const Case& c = GetParam();
  Pcg32 rng(17);
  auto cpu = create_network(reference_config_of(c), c.in, c.out, {Device::CPU, DType::F64});
  std::vector<float> init(cpu->n_params());
  cpu->initialize_params(rng, init.data(), 1.0f);
  // Biases start at zero; make them random so their path is checked.
  for (const auto& s : cpu->param_segments())
    if (s.kind == ParamSegment::Kind::Vector)
      for (size_t i = 0; i < s.count; ++i) init[s.offset + i] = 0.2f * (rng.next_float() - 0.5f);
  GpuModel gpu(c, init);
  const DType t = gpu.net->param_dtype();
  std::vector<double> p64 = rounded(init, t), g64(cpu->n_params());
  cpu->set_params(TensorView::vector(p64.data(), p64.size()), TensorView::vector(p64.data(), p64.size()),
                  TensorView::vector(g64.data(), g64.size()));
  const uint32_t W = gpu.net->padded_output_width();

  for (int64_t batch : batch_sizes()) {
    SCOPED_TRACE(c.otype + " batch " + std::to_string(batch));
    std::vector<float> x(batch * c.in), dy(batch * W);
    for (auto& v : x) v = rng.next_float() * 2 - 1;
    for (auto& v : dy) v = rng.next_float() * 2 - 1;
    std::vector<double> x64 = rounded(x, t), dy64 = rounded(dy, t);

    Buffer xin(Device::CUDA, x.size() * dtype_size(t)), out(Device::CUDA, batch * W * dtype_size(t));
    Buffer dout(Device::CUDA, dy.size() * dtype_size(t)), din(Device::CUDA, x.size() * dtype_size(t));
    TensorView xv = xin.matrix(t, batch, c.in), ov = out.matrix(t, batch, W);
    TensorView dyv = dout.matrix(t, batch, W), dxv = din.matrix(t, batch, c.in);
    copy_tensor(xv, TensorView::matrix(x.data(), batch, c.in));
    copy_tensor(dyv, TensorView::matrix(dy.data(), batch, W));

    std::vector<double> ref_out(batch * W), ref_dx(batch * c.in);
    auto ctx = cpu->forward(TensorView::matrix(x64.data(), batch, c.in), nullptr);
    cpu->inference(TensorView::matrix(x64.data(), batch, c.in), TensorView::matrix(ref_out.data(), batch, W));
    ctx = cpu->forward(TensorView::matrix(x64.data(), batch, c.in), nullptr);
    TensorView rdx = TensorView::matrix(ref_dx.data(), batch, c.in);
    cpu->backward(*ctx, TensorView::matrix(x64.data(), batch, c.in), TensorView{}, TensorView::matrix(dy64.data(), batch, W),
                  &rdx, false, GradientMode::Overwrite);

    fill_tensor(ov, NAN);
    gpu.net->inference(xv, ov);
    EXPECT_LE(rel_l2(to_host(ov), ref_out), c.tolerance) << "inference";
    fill_tensor(ov, NAN);
    auto gctx = gpu.net->forward(xv, &ov, false, true);
    const auto forward_out = to_host(ov);
    EXPECT_LE(rel_l2(forward_out, ref_out), c.tolerance) << "forward";
    fill_tensor(dxv, NAN);
    fill_tensor(gpu.grads.vector(t, gpu.net->n_params()), NAN);
    gpu.net->backward(*gctx, xv, ov, dyv, &dxv, false, GradientMode::Overwrite);
    EXPECT_LE(rel_l2(to_host(dxv), ref_dx), c.tolerance) << "input gradients";
    // FP16 gradients of a large batch are sums of thousands of products: compare in the same
    // relative-L2 norm, over all parameters at once.
    EXPECT_LE(rel_l2(to_host(gpu.grads.vector(t, gpu.net->n_params())), g64), c.tolerance) << "parameter gradients";

    // Repeated launches are bitwise identical.
    gpu.net->inference(xv, ov);
    const auto again = to_host(ov);
    gpu.net->inference(xv, ov);
    EXPECT_EQ(std::memcmp(again.data(), to_host(ov).data(), again.size() * sizeof(double)), 0) << "repeat";
  }
}

TEST_P(Qualification, TwoStreamsHotSwapAndGradientModes) {
  const Case& c = GetParam();
  Pcg32 rng(5);
  auto cpu = create_network(reference_config_of(c), c.in, c.out, {Device::CPU, DType::F64});
  std::vector<float> a(cpu->n_params()), b(cpu->n_params());
  cpu->initialize_params(rng, a.data(), 1.0f);
  cpu->initialize_params(rng, b.data(), 1.0f);
  GpuModel m1(c, a), m2(c, b);
  const DType t = m1.net->param_dtype();
  const int64_t batch = 4097;
  const uint32_t W = m1.net->padded_output_width();
  std::vector<float> x(batch * c.in);
  for (auto& v : x) v = rng.next_float() * 2 - 1;
  const tinyfuse::testing::OwnedStream s1, s2;  // outlive the buffers and the context below
  Buffer xin(Device::CUDA, x.size() * dtype_size(t)), o1(Device::CUDA, batch * W * dtype_size(t)), o2(Device::CUDA, batch * W * dtype_size(t));
  TensorView x1 = xin.matrix(t, batch, c.in, s1), x2 = xin.matrix(t, batch, c.in, s2);
  copy_tensor(x1, TensorView::matrix(x.data(), batch, c.in));
  TensorView v1 = o1.matrix(t, batch, W, s1), v2 = o2.matrix(t, batch, W, s2);
  // Alone, each model's output on its stream.
  m1.net->inference(x1, v1);
  const auto alone1 = to_host(v1);
  m2.net->inference(x2, v2);
  const auto alone2 = to_host(v2);
  EXPECT_NE(alone1, alone2);
  // Interleaved on two non-default streams, many times: outputs stay each model's own.
  fill_tensor(v1, NAN);
  fill_tensor(v2, NAN);
  for (int i = 0; i < 20; ++i) {
    m1.net->inference(x1, v1);
    m2.net->inference(x2, v2);
  }
  synchronize(Device::CUDA, s1);
  synchronize(Device::CUDA, s2);
  EXPECT_EQ(to_host(v1), alone1);
  EXPECT_EQ(to_host(v2), alone2);
  // Hot swap A -> B -> A restores the exact output.
  m1.set(b);
  m1.net->inference(x1, v1);
  EXPECT_EQ(to_host(v1), alone2);
  m1.set(a);
  m1.net->inference(x1, v1);
  EXPECT_EQ(to_host(v1), alone1);
  // Gradient modes: Accumulate doubles, Ignore leaves, Overwrite restores.
  Buffer dout(Device::CUDA, batch * W * dtype_size(t));
  TensorView dyv = dout.matrix(t, batch, W, s1);
  fill_tensor(dyv, 0.25);
  auto ctx = m1.net->forward(x1, &v1);
  const TensorView g = m1.grads.vector(t, m1.net->n_params(), s1);
  m1.net->backward(*ctx, x1, v1, dyv, nullptr, false, GradientMode::Overwrite);
  const auto once = to_host(g);
  m1.net->backward(*ctx, x1, v1, dyv, nullptr, false, GradientMode::Accumulate);
  const auto twice = to_host(g);
  double worst = 0;
  for (size_t i = 0; i < once.size(); ++i) worst = std::max(worst, std::abs(twice[i] - 2 * once[i]) / (std::abs(2 * once[i]) + 1e-3));
  EXPECT_LE(worst, c.tolerance * 10) << "Accumulate must add exactly one more gradient";
  m1.net->backward(*ctx, x1, v1, dyv, nullptr, false, GradientMode::Ignore);
  EXPECT_EQ(to_host(g), twice);
  m1.net->backward(*ctx, x1, v1, dyv, nullptr, false, GradientMode::Overwrite);
  EXPECT_EQ(to_host(g), once);
}

INSTANTIATE_TEST_SUITE_P(GpuNetworks, Qualification, ::testing::ValuesIn(kCases), [](const auto& info) {
  const Case& c = info.param;
  return c.otype + "_" + std::to_string(c.in) + "x" + std::to_string(c.neurons) + "x" + std::to_string(c.hidden) + "_" + c.activation;
});

// 100 training steps of the 64->64x2->64 MLP on the GPU follow the CPU trainer's loss trajectory.
// Tolerance: FP32 networks stay within 1e-3 relative of the CPU loss at every step (float
// rounding differs in summation order only); the FP16 network within 3e-2 (FP16 parameters and
// activations).
class TrainingTrajectory : public ::testing::TestWithParam<std::pair<std::string, double>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(TrainingTrajectory, FollowsCpuTrainer) {
  const auto& [otype, tol] = GetParam();
  json cfg = {{"loss", {{"otype", "L2"}}},
              {"optimizer", {{"otype", "Adam"}, {"learning_rate", 1e-3}}},
              {"network", {{"otype", otype}, {"n_neurons", 64}, {"n_hidden_layers", 2}, {"activation", "ReLU"}}}};
  json cpu_cfg = cfg;
  cpu_cfg["network"]["otype"] = otype == "FullyFusedMLP" ? "FullyFusedMLP" : "PortableMLP";  // same layout
  Model gpu = create_from_config(64, 64, cfg, {Device::CUDA}, 1337);
  Model cpu = create_from_config(64, 64, cpu_cfg, {Device::CPU}, 1337);
  ASSERT_EQ(gpu.trainer->params_host(), cpu.trainer->params_host()) << "same seed, same layout, same initial parameters";
  const DType t = gpu.network->input_dtype();
  const int64_t batch = 1024;
  Pcg32 rng(3);
  Buffer xin(Device::CUDA, batch * 64 * dtype_size(t)), target(Device::CUDA, batch * 64 * sizeof(float));
  std::vector<float> x(batch * 64), y(batch * 64);
  for (int step = 0; step < 100; ++step) {
    for (int64_t i = 0; i < batch * 64; ++i) {
      x[i] = rng.next_float() * 2 - 1;
      y[i] = std::sin(3 * x[i]);
    }
    copy_tensor(xin.matrix(t, batch, 64), TensorView::matrix(x.data(), batch, 64));
    copy_tensor(target.matrix(DType::F32, batch, 64), TensorView::matrix(y.data(), batch, 64));
    std::vector<float> x_cpu = x;
    if (t == DType::F16)
      for (auto& v : x_cpu) v = half_bits_to_float(float_to_half_bits(v));
    const float lg = gpu.trainer->training_step(xin.matrix(t, batch, 64), target.matrix(DType::F32, batch, 64));
    const float lc = cpu.trainer->training_step(TensorView::matrix(x_cpu.data(), batch, 64), TensorView::matrix(y.data(), batch, 64));
    ASSERT_NEAR(lg, lc, tol * std::abs(lc)) << otype << " step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(GpuTrainers, TrainingTrajectory,
                         ::testing::Values(std::make_pair(std::string("PortableMLP"), 1e-3),
                                           std::make_pair(std::string("BlasLtMLP"), 1e-3),
                                           std::make_pair(std::string("BlasLtMLPFP16"), 3e-2),
                                           std::make_pair(std::string("FullyFusedMLP"), 3e-2)),
                         [](const auto& info) { return info.param.first; });

}  // namespace
