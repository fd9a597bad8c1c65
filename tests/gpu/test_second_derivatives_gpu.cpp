// Second derivatives (backward_backward_input) on CUDA against the CPU FP64 reference: every
// network otype with smooth and piecewise-linear activations, the row-wise encodings, Composite,
// and NetworkWithInputEncoding of the SDF shape (3-D HashGrid -> 64-wide FullyFusedMLP, Softplus
// and ReLU in FP32). FullyFusedMLP both ways: through its fused second-order kernel (the
// planner's choice, asserted) at every width, depth, curved output and weights streamed, and
// through the FP32 sweeps it falls back to. Same parameters and inputs on both sides (values exact
// in the CUDA dtypes), fresh random ones per case, every output poisoned (NaN) first so an
// unwritten element fails.
//
// Every case must match the reference, except those marked as refusing (a Composite's Product
// reduction, whose cross terms are CPU-only): they must throw UnsupportedError naming themselves
// and the device before writing anything (outputs and gradients still NaN). Runs on the device
// machine; skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/activation_math.h"
#include "cuda/fused/fully_fused_mlp.h"
#include "cuda/fused/kernel_common.cuh"
#include "cuda/fused/launch_config.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
namespace fz = tinyfuse::cuda::fused;

namespace {

const BuildOptions kGpu{Device::CUDA};
// FullyFusedMLP without its fused second-order kernel: the FP32 sweeps.
BuildOptions fp32_sweeps() {
  BuildOptions o{Device::CUDA};
  o.fused_kernels.fused_second_order = false;
  return o;
}
const BuildOptions kF64{Device::CPU, DType::F64};

struct Dev {
  Buffer buf;
  TensorView view;
};

// A poisoned (NaN) device matrix, or with rows == 0 a vector of `cols` elements (parameters).
Dev dev_matrix(DType t, int64_t rows, int64_t cols) {
  const int64_t n = std::max<int64_t>(rows, 1) * cols;
  Dev m{Buffer(Device::CUDA, std::max<size_t>(static_cast<size_t>(n) * dtype_size(t), 4)), {}};
  m.view = rows == 0 ? m.buf.vector(t, cols) : m.buf.matrix(t, rows, cols);
  fill_tensor(m.view, NAN);
  return m;
}

Dev upload(const std::vector<double>& host, DType t, int64_t rows, int64_t cols) {
  Dev m = dev_matrix(t, rows, cols);
  double* h = const_cast<double*>(host.data());
  copy_tensor(m.view, rows == 0 ? TensorView::vector(h, cols) : TensorView::matrix(h, rows, cols));
  return m;
}

std::vector<double> download(const TensorView& v) {
  std::vector<double> h(static_cast<size_t>(v.numel()));
  copy_tensor(v.ndim == 1 ? TensorView::vector(h.data(), v.numel()) : TensorView::matrix(h.data(), v.rows(), v.cols()), v);
  return h;
}

double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

bool all_nan(const std::vector<double>& v) {
  for (double e : v)
    if (!std::isnan(e)) return false;
  return true;
}

// x rounded to a value exactly representable in `t` (for |x| < 2, multiples of 2^-10 fit FP16's
// 11 significant bits), so both sides compute from the same numbers.
double representable(double x, DType t) {
  if (t == DType::F16) return std::round(x * 1024.0) / 1024.0;
  return static_cast<float>(x);
}

std::vector<double> random_values(Pcg32& rng, size_t n, DType t, double lo = -1, double hi = 1) {
  std::vector<double> v(n);
  for (auto& x : v) x = representable(lo + (hi - lo) * rng.next_double(), t);
  return v;
}

double tolerance(DType t) { return t == DType::F32 ? 1e-4 : 2e-2; }

struct Case {
  std::string name;
  json encoding;  // null: a network alone
  json network;   // null: an encoding alone
  uint32_t n_in, n_out;
  double lo, hi;
  bool refuses = false;  // no second derivatives on CUDA: must refuse before writing
  bool sweeps = false;   // FullyFusedMLP on the FP32 sweeps (fused_second_order off)
};

// The BlasLt networks are CUDA-only: their CPU reference is PortableMLP, which has their
// parameter layout (weights then bias per layer).
json on_device(json network, const BuildOptions& o) {
  if (o.device == Device::CPU && !network.is_null()) {
    const std::string otype = network.at("otype");
    if (otype == "BlasLtMLP" || otype == "BlasLtMLPFP16") network["otype"] = "PortableMLP";
  }
  return network;
}

std::unique_ptr<DifferentiableObject> build(const Case& c, const BuildOptions& o) {
  if (c.network.is_null()) return create_encoding(c.encoding, c.n_in, o);
  if (c.encoding.is_null()) return create_network(on_device(c.network, o), c.n_in, c.n_out, o);
  return create_network_with_input_encoding(c.n_in, c.n_out, c.encoding, on_device(c.network, o), o);
}

json mlp(const std::string& otype, uint32_t neurons, const std::string& act, int n_hidden = 2,
         const std::string& out_act = "None") {
  return {{"otype", otype}, {"n_neurons", neurons}, {"n_hidden_layers", n_hidden}, {"activation", act},
          {"output_activation", out_act}};
}

bool is_fused_mlp(const Case& c) { return !c.network.is_null() && c.network.at("otype") == "FullyFusedMLP"; }

// The planner's rule for the fused second-order kernel (plan_general_second_order): the block's
// warps keep their rows in at most half of this device's shared memory per block; larger shapes
// run the FP32 sweeps.
bool fused_rows_fit(const Case& c, const DifferentiableObject& gpu) {
  const json& n = c.network;
  fz::FusedShape shape;
  shape.width = n.at("n_neurons").get<int>();
  shape.in_width = static_cast<int>(gpu.input_width());
  shape.out_width = static_cast<int>(gpu.padded_output_width());
  shape.n_hidden = n.at("n_hidden_layers").get<int>();
  const Activation act = parse_activation(n.at("activation"), "activation");
  const Activation out = parse_activation(n.at("output_activation"), "output_activation");
  const int rows = shape.width <= 32 ? 64 : shape.width == 64 ? 32 : 16;  // Tiling<width>::kRows
  const size_t block = fz::kWarpsPerBlock * fz::second_order_warp_state_bytes(shape, rows, 2, !activation_is_piecewise_linear(act),
                                                                             !activation_is_piecewise_linear(out));
  return block <= fz::device_limits().max_smem_per_block / 2;
}

// The object's own initial parameters, biases and grid entries moved off zero, clamped to
// (-1.9, 1.9) and rounded to values its parameter dtype holds exactly.
std::vector<double> test_params(DifferentiableObject& object, Pcg32& rng) {
  const size_t n = object.n_params();
  std::vector<float> init(n);
  object.initialize_params(rng, init.data(), 1.0f);
  std::vector<double> params(init.begin(), init.end());
  for (const ParamSegment& s : object.param_segments())
    for (size_t i = s.offset; i < s.offset + s.count; ++i)
      if (s.kind != ParamSegment::Kind::Matrix) params[i] += 0.5 * (2 * rng.next_double() - 1);
  for (double& p : params) p = std::max(-1.9, std::min(1.9, representable(p, object.param_dtype())));
  return params;
}

const json kSdfGrid = {{"otype", "HashGrid"}, {"n_levels", 8}, {"n_features_per_level", 2}, {"log2_hashmap_size", 15},
                       {"base_resolution", 8}, {"per_level_scale", 1.5}, {"interpolation", "Smoothstep"}};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* otype : {"PortableMLP", "FullyFusedMLP", "BlasLtMLP", "BlasLtMLPFP16"})  // (CutlassMLP: CPU only)
    for (const char* act : {"Softplus", "ReLU", "Tanh"})
      v.push_back({std::string(otype) + "_" + act, nullptr, mlp(otype, 64, act), 32, 16, -1, 1});
  for (const char* act : {"Softplus", "ReLU", "Tanh"}) {
    Case c{std::string("FullyFusedMLP_") + act + "_fp32_sweeps", nullptr, mlp("FullyFusedMLP", 64, act), 32, 16, -1, 1};
    c.sweeps = true;
    v.push_back(c);
  }
  // The fused second-order kernel's other shapes: each width (16 and 32 keep four and two more
  // 16-row tiles per warp), one to four hidden layers, inputs of one to three k-steps, outputs of
  // one and two column blocks, a curved output above piecewise-linear or identity hidden layers
  // (dZ2 flows down from the output alone), both curved, weights streamed layer by layer (three
  // hidden layers of 128 beside the warps' rows exceed the resident budget on sm_90), and a shape
  // whose rows do not fit (the planner's fallback to the FP32 sweeps; fused_rows_fit).
  v.push_back({"FullyFusedMLP_w16_Softplus", nullptr, mlp("FullyFusedMLP", 16, "Softplus", 2), 16, 16, -1, 1});
  v.push_back({"FullyFusedMLP_w32_SiLU_in48_out32", nullptr, mlp("FullyFusedMLP", 32, "SiLU", 1), 48, 32, -1, 1});
  v.push_back({"FullyFusedMLP_w128_Tanh_h3_streamed", nullptr, mlp("FullyFusedMLP", 128, "Tanh", 3), 32, 16, -1, 1});
  v.push_back({"FullyFusedMLP_ReLU_SigmoidOut", nullptr, mlp("FullyFusedMLP", 64, "ReLU", 2, "Sigmoid"), 32, 16, -1, 1});
  v.push_back({"FullyFusedMLP_None_TanhOut", nullptr, mlp("FullyFusedMLP", 32, "None", 1, "Tanh"), 16, 16, -1, 1});
  v.push_back({"FullyFusedMLP_Softplus_SoftplusOut", nullptr, mlp("FullyFusedMLP", 64, "Softplus", 2, "Softplus"), 32, 3,
               -1, 1});
  // Four curved hidden layers of 128: the warps' rows exceed half of an sm_90 block's shared memory.
  v.push_back({"FullyFusedMLP_w128_Softplus_h4", nullptr, mlp("FullyFusedMLP", 128, "Softplus", 4), 32, 16, -1, 1});
  // The SDF shape with ReLU in FP32 (PortableMLP): see EikonalSequenceGpu on FP16 at the kink.
  v.push_back({"SdfShape_Softplus", kSdfGrid, mlp("FullyFusedMLP", 64, "Softplus"), 3, 1, 0.05, 0.95});
  v.push_back({"SdfShape_ReLU_fp32", kSdfGrid, mlp("PortableMLP", 64, "ReLU"), 3, 1, 0.05, 0.95});
  v.push_back({"Frequency", {{"otype", "Frequency"}, {"n_frequencies", 4}}, nullptr, 3, 0, -1, 1});
  v.push_back({"OneBlob", {{"otype", "OneBlob"}, {"n_bins", 8}}, nullptr, 2, 0, 0, 1});
  v.push_back({"TriangleWave", {{"otype", "TriangleWave"}, {"n_frequencies", 4}}, nullptr, 2, 0, -1, 1});
  v.push_back({"SphericalHarmonics", {{"otype", "SphericalHarmonics"}, {"degree", 4}}, nullptr, 3, 0, 0, 1});
  for (uint32_t degree : {1u, 2u, 3u, 5u, 6u, 7u, 8u})  // each degree has its own kernels on the GPU
    v.push_back({"SphericalHarmonics" + std::to_string(degree), {{"otype", "SphericalHarmonics"}, {"degree", degree}},
                 nullptr, 3, 0, 0, 1});
  v.push_back({"Identity", {{"otype", "Identity"}, {"scale", 2.0}}, nullptr, 3, 0, -1, 1});
  v.push_back({"Composite",
               {{"otype", "Composite"},
                {"nested", {{{"otype", "SphericalHarmonics"}, {"degree", 3}, {"n_dims_to_encode", 3}},
                            {{"otype", "Frequency"}, {"n_frequencies", 2}}}}},
               nullptr, 4, 0, 0, 1});
  v.push_back({"CompositeSum",
               {{"otype", "Composite"},
                {"reduction", "Sum"},
                {"nested",
                 {{{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 2}},
                  {{"otype", "OneBlob"}, {"n_bins", 4}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 0}}}}},
               nullptr, 2, 0, 0, 1});
  v.push_back({"CompositeProduct",
               {{"otype", "Composite"},
                {"reduction", "Product"},
                {"nested",
                 {{{"otype", "Frequency"}, {"n_frequencies", 2}, {"n_dims_to_encode", 2}},
                  {{"otype", "OneBlob"}, {"n_bins", 4}, {"n_dims_to_encode", 2}, {"dims_to_encode_begin", 0}}}}},
               nullptr, 2, 0, 0, 1, /*refuses=*/true});
  return v;
}

class SecondDerivativesGpu : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(SecondDerivativesGpu, MatchTheCpuReferenceOrRefuseBeforeWriting) {
  const int64_t requested = GetParam();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto gpu = build(c, c.sweeps ? fp32_sweeps() : kGpu);
    auto ref = build(c, kF64);
    const int64_t g = std::max<uint32_t>(1, gpu->batch_granularity());
    const int64_t batch = (requested + g - 1) / g * g;
    const int64_t in_w = gpu->input_width(), out_w = gpu->padded_output_width();
    ASSERT_EQ(ref->input_width(), static_cast<uint32_t>(in_w));
    ASSERT_EQ(ref->padded_output_width(), static_cast<uint32_t>(out_w));
    const size_t n = gpu->n_params();
    Pcg32 rng(1000 + batch + c.name.size());

    std::vector<double> params = test_params(*gpu, rng);
    const DType pt = gpu->param_dtype(), it = gpu->input_dtype(), ot = gpu->output_dtype();
    const std::vector<double> x = random_values(rng, size_t(batch) * in_w, it, c.lo, c.hi);
    const std::vector<double> dy = random_values(rng, size_t(batch) * out_w, ot);
    const std::vector<double> v = random_values(rng, size_t(batch) * in_w, it);

    // Reference.
    std::vector<double> ref_grads(n, NAN), ref_y(size_t(batch) * out_w), ref_ddy(size_t(batch) * out_w), ref_d2x(size_t(batch) * in_w);
    auto pv = TensorView::vector(params.data(), int64_t(n));
    ref->set_params(pv, pv, TensorView::vector(ref_grads.data(), int64_t(n)));
    auto xv = TensorView::matrix(const_cast<double*>(x.data()), batch, in_w);
    auto yv = TensorView::matrix(ref_y.data(), batch, out_w);
    auto rctx = ref->forward(xv, &yv, false, true);
    auto ddyv = TensorView::matrix(ref_ddy.data(), batch, out_w), d2xv = TensorView::matrix(ref_d2x.data(), batch, in_w);
    ref->backward_backward_input(*rctx, xv, TensorView::matrix(const_cast<double*>(v.data()), batch, in_w),
                                 TensorView::matrix(const_cast<double*>(dy.data()), batch, out_w), &ddyv, &d2xv, false,
                                 GradientMode::Overwrite);

    // CUDA.
    Dev p = upload(params, pt, 0, int64_t(n)), grads = dev_matrix(pt, 0, int64_t(n));
    gpu->set_params(p.view, p.view, grads.view);
    Dev gx = upload(x, it, batch, in_w), gdy = upload(dy, ot, batch, out_w), gv = upload(v, it, batch, in_w);
    Dev y = dev_matrix(ot, batch, out_w), ddy = dev_matrix(ot, batch, out_w), d2x = dev_matrix(it, batch, in_w);
    auto gctx = gpu->forward(gx.view, &y.view, false, true);
    try {
      gpu->backward_backward_input(*gctx, gx.view, gv.view, gdy.view, &ddy.view, &d2x.view, false, GradientMode::Overwrite);
      EXPECT_FALSE(c.refuses) << "has no second derivatives on CUDA, yet did not refuse";
      if (is_fused_mlp(c))
        EXPECT_EQ(cuda::fused_kernel_used(*gpu, fz::FusedPass::SecondOrder),
                  c.sweeps || !fused_rows_fit(c, *gpu) ? fz::FusedKernel::None : fz::FusedKernel::GeneralSecondOrder);
    } catch (const UnsupportedError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(c.refuses) << msg;
      EXPECT_NE(msg.find("backward_backward_input"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cuda"), std::string::npos) << msg;
      synchronize(Device::CUDA, nullptr);
      EXPECT_TRUE(all_nan(download(ddy.view))) << "wrote dL2/d(dL/doutput) before refusing";
      EXPECT_TRUE(all_nan(download(d2x.view))) << "wrote dL2/dinput before refusing";
      EXPECT_TRUE(all_nan(download(grads.view))) << "wrote parameter gradients before refusing";
      continue;
    }
    const double tol = tolerance(ot == DType::F32 && pt == DType::F32 ? DType::F32 : DType::F16);
    EXPECT_LE(rel_l2(download(ddy.view), ref_ddy), tol) << "dL2/d(dL/doutput)";
    EXPECT_LE(rel_l2(download(d2x.view), ref_d2x), tol) << "dL2/dinput";
    const auto gr = download(grads.view);
    for (const ParamSegment& s : gpu->param_segments()) {
      const std::vector<double> a(gr.begin() + s.offset, gr.begin() + s.offset + s.count);
      const std::vector<double> b(ref_grads.begin() + s.offset, ref_grads.begin() + s.offset + s.count);
      EXPECT_LE(rel_l2(a, b), tol) << "dL2/dparams, segment at " << s.offset;
    }
  }
}

// The eikonal training step's sequence of calls on one forward context, as the W4e workload and
// learn-sdf make them: backward for grad_x f (GradientMode::Ignore), backward of the L1 term
// (Overwrite), then backward_backward_input of the eikonal term added (Accumulate). Each stage
// against the CPU FP64 reference making the same calls: a context a backward pass disturbs, or an
// Accumulate that overwrites, fails here.
TEST(EikonalSequenceGpu, EachStageMatchesTheCpuReference) {
  if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  std::vector<Case> sequence_cases;
  // Softplus, as SDF methods train (ReLU's second derivative is zero). ReLU only in FP32: in FP16
  // a pre-activation within rounding of the kink flips side against the FP64 reference, and a
  // few flipped units move the gradients by ~3 % (rel. L2) at these batches.
  for (const char* otype : {"FullyFusedMLP", "PortableMLP"})
    sequence_cases.push_back({std::string("Sdf_") + otype + "_Softplus", kSdfGrid, mlp(otype, 64, "Softplus"), 3, 1, 0.05, 0.95});
  sequence_cases.push_back({"Sdf_PortableMLP_ReLU", kSdfGrid, mlp("PortableMLP", 64, "ReLU"), 3, 1, 0.05, 0.95});
  for (const int64_t requested : {257, 4096}) {
    for (const Case& c : sequence_cases) {
      SCOPED_TRACE(c.name + " batch " + std::to_string(requested));
      auto gpu = build(c, kGpu);
      auto ref = build(c, kF64);
      const int64_t g = std::max<uint32_t>(1, gpu->batch_granularity());
      const int64_t batch = (requested + g - 1) / g * g;
      const int64_t in_w = gpu->input_width(), out_w = gpu->padded_output_width();
      const size_t n = gpu->n_params();
      Pcg32 rng(77 + batch);
      std::vector<double> params = test_params(*gpu, rng);
      const DType pt = gpu->param_dtype(), it = gpu->input_dtype(), ot = gpu->output_dtype();
      const std::vector<double> x = random_values(rng, size_t(batch) * in_w, it, c.lo, c.hi);
      std::vector<double> ones(size_t(batch) * out_w, 0.0), d_out(size_t(batch) * out_w, 0.0);
      for (int64_t r = 0; r < batch; ++r) {
        ones[size_t(r * out_w)] = 1.0;
        d_out[size_t(r * out_w)] = representable(rng.next_double() - 0.5, ot);
      }
      const std::vector<double> v = random_values(rng, size_t(batch) * in_w, it);

      // Reference: the same calls in FP64 on the CPU.
      std::vector<double> ref_y(size_t(batch) * out_w), ref_gx(size_t(batch) * in_w), ref_l1(n, NAN), ref_grads(n, NAN);
      auto pv = TensorView::vector(params.data(), int64_t(n));
      ref->set_params(pv, pv, TensorView::vector(ref_grads.data(), int64_t(n)));
      auto mat = [&](std::vector<double>& h, int64_t cols) { return TensorView::matrix(h.data(), batch, cols); };
      std::vector<double> xr = x, onesr = ones, d_outr = d_out, vr = v;
      TensorView ref_yv = mat(ref_y, out_w), ref_gxv = mat(ref_gx, in_w);
      auto rctx = ref->forward(mat(xr, in_w), &ref_yv, false, true);
      ref->backward(*rctx, mat(xr, in_w), ref_yv, mat(onesr, out_w), &ref_gxv, false, GradientMode::Ignore);
      ref->backward(*rctx, mat(xr, in_w), ref_yv, mat(d_outr, out_w), nullptr, false, GradientMode::Overwrite);
      ref_l1 = ref_grads;
      ref->backward_backward_input(*rctx, mat(xr, in_w), mat(vr, in_w), mat(onesr, out_w), nullptr, nullptr, false,
                                   GradientMode::Accumulate);

      // CUDA, every output poisoned first.
      Dev p = upload(params, pt, 0, int64_t(n)), grads = dev_matrix(pt, 0, int64_t(n));
      gpu->set_params(p.view, p.view, grads.view);
      Dev gx = upload(x, it, batch, in_w), gones = upload(ones, ot, batch, out_w), gd = upload(d_out, ot, batch, out_w),
          gv = upload(v, it, batch, in_w);
      Dev y = dev_matrix(ot, batch, out_w), grad_x = dev_matrix(it, batch, in_w);
      auto ctx = gpu->forward(gx.view, &y.view, false, true);
      gpu->backward(*ctx, gx.view, y.view, gones.view, &grad_x.view, false, GradientMode::Ignore);
      const double tol = tolerance(ot == DType::F32 && pt == DType::F32 ? DType::F32 : DType::F16);
      EXPECT_LE(rel_l2(download(grad_x.view), ref_gx), tol) << "grad_x f";
      gpu->backward(*ctx, gx.view, y.view, gd.view, nullptr, false, GradientMode::Overwrite);
      EXPECT_LE(rel_l2(download(grads.view), ref_l1), tol) << "the L1 term's parameter gradients (after a first backward)";
      gpu->backward_backward_input(*ctx, gx.view, gv.view, gones.view, nullptr, nullptr, false, GradientMode::Accumulate);
      const auto got = download(grads.view);
      for (const ParamSegment& s : gpu->param_segments()) {
        const std::vector<double> a(got.begin() + s.offset, got.begin() + s.offset + s.count);
        const std::vector<double> b(ref_grads.begin() + s.offset, ref_grads.begin() + s.offset + s.count);
        EXPECT_LE(rel_l2(a, b), tol) << "L1 + eikonal parameter gradients, segment at " << s.offset << " (" << s.count << ")";
      }
    }
  }
}

// The fused second-order kernel's own guarantees, on the SDF network shape: a repeated call gives
// the same bits (fixed-order weight-gradient sums); Accumulate adds exactly what Overwrite writes
// (checked against the sum in FP32, within one rounding); caller views with unaligned rows
// (column slices of wider matrices) give the same bits as dense ones; an empty batch clears the
// gradients under Overwrite and writes nothing else.
TEST(FusedSecondOrderGpu, RepeatsAccumulatesAndTakesAnyView) {
  if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  const json config = mlp("FullyFusedMLP", 64, "Softplus");
  auto net = create_network(config, 32, 1, kGpu);
  const int64_t batch = 3001, in_w = 32, out_w = net->padded_output_width();
  const size_t n = net->n_params();
  Pcg32 rng(4242);
  const std::vector<double> params = test_params(*net, rng);
  Dev p = upload(params, DType::F16, 0, int64_t(n)), grads = dev_matrix(DType::F16, 0, int64_t(n));
  net->set_params(p.view, p.view, grads.view);
  const std::vector<double> x = random_values(rng, size_t(batch) * in_w, DType::F16);
  const std::vector<double> v = random_values(rng, size_t(batch) * in_w, DType::F16);
  const std::vector<double> dy = random_values(rng, size_t(batch) * out_w, DType::F16);
  Dev gx = upload(x, DType::F16, batch, in_w), gv = upload(v, DType::F16, batch, in_w), gdy = upload(dy, DType::F16, batch, out_w);
  auto ctx = net->forward(gx.view, nullptr, false, true);

  auto run = [&](const TensorView& xv, const TensorView& vv, const TensorView& dyv, const TensorView& ddy, const TensorView& d2x,
                 GradientMode mode) {
    net->backward_backward_input(*ctx, xv, vv, dyv, &ddy, &d2x, false, mode);
    return std::vector<std::vector<double>>{download(ddy), download(d2x), download(grads.view)};
  };
  Dev ddy = dev_matrix(DType::F16, batch, out_w), d2x = dev_matrix(DType::F16, batch, in_w);
  const auto first = run(gx.view, gv.view, gdy.view, ddy.view, d2x.view, GradientMode::Overwrite);
  EXPECT_EQ(cuda::fused_kernel_used(*net, fz::FusedPass::SecondOrder), fz::FusedKernel::GeneralSecondOrder);
  for (const auto& part : first) EXPECT_FALSE(std::any_of(part.begin(), part.end(), [](double e) { return std::isnan(e); }));
  const auto again = run(gx.view, gv.view, gdy.view, ddy.view, d2x.view, GradientMode::Overwrite);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(again[i], first[i]) << "repeat, output " << i;

  // Accumulate onto the gradients of the first call: FP16(g + g) == 2 g exactly.
  const auto twice = run(gx.view, gv.view, gdy.view, ddy.view, d2x.view, GradientMode::Accumulate);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(twice[2][i], 2 * first[2][i]) << "parameter " << i;

  // The same operands as column slices of wider matrices (rows not 16-byte aligned): staged.
  auto wide_slice = [&](const std::vector<double>& host, int64_t cols) {
    std::vector<double> wide(size_t(batch) * (cols + 3), NAN);
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t c = 0; c < cols; ++c) wide[size_t(r * (cols + 3) + 1 + c)] = host[size_t(r * cols + c)];
    Dev d = upload(wide, DType::F16, batch, cols + 3);
    const TensorView view = d.view.cols_slice(1, cols);
    return std::make_pair(std::move(d), view);
  };
  auto [wx, sx] = wide_slice(x, in_w);
  auto [wv, sv] = wide_slice(v, in_w);
  auto [wdy, sdy] = wide_slice(dy, out_w);
  auto [wddy, sddy] = wide_slice(std::vector<double>(size_t(batch) * out_w, NAN), out_w);
  auto [wd2x, sd2x] = wide_slice(std::vector<double>(size_t(batch) * in_w, NAN), in_w);
  const auto sliced = run(sx, sv, sdy, sddy, sd2x, GradientMode::Overwrite);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(sliced[i], first[i]) << "unaligned views, output " << i;

  // An empty batch: Overwrite clears the parameter gradients.
  auto empty_ctx = net->forward(gx.view.rows_slice(0, 0), nullptr, false, true);
  net->backward_backward_input(*empty_ctx, gx.view.rows_slice(0, 0), gv.view.rows_slice(0, 0), gdy.view.rows_slice(0, 0),
                               nullptr, nullptr, false, GradientMode::Overwrite);
  const auto cleared = download(grads.view);
  EXPECT_TRUE(std::all_of(cleared.begin(), cleared.end(), [](double e) { return e == 0.0; }));
}

INSTANTIATE_TEST_SUITE_P(Batches, SecondDerivativesGpu, ::testing::Values(1, 257, 4096),
                         [](const auto& info) { return "batch" + std::to_string(info.param); });

}  // namespace
