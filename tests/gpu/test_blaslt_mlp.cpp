// BlasLtMLP (FP32) and BlasLtMLPFP16 against the CPU FP64 reference (PortableMLP in FP64 with the
// same parameters): forward, inference, input and parameter gradients in every gradient mode,
// strided views, bitwise-repeatable launches, initialisation and argument checks (batch 0 is the
// conformance suite's, tests/conformance/).
// Runs on the device machine; skips without a GPU.
//
// FP16 reference. Parameters, inputs and output gradients are rounded to FP16 first, and the FP64
// network is run one layer at a time, with what BlasLtMLPFP16 stores in FP16 (each layer's z and
// y, dZ and dY) rounded to FP16 in between: every layer's reference is computed from FP16-rounded
// inputs. An end-to-end FP64 reference cannot be met within 2e-3 by any network that stores FP16
// activations where an activation jumps: with ReLU, a z that lies within an FP16 rounding of 0
// lands on the other side, and each such element moves the gradient by a whole dY (measured: 1e-2
// relative L2 for 64-wide ReLU); sin(30 x) likewise amplifies the rounding of z (3e-3).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/activation_math.h"
#include "core/half.h"
#include "testing/device_matrix.h"
#include "testing/host_copies.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
using tinyfuse::testing::download;
using tinyfuse::testing::upload;

namespace {

const BuildOptions kGpu{Device::CUDA};
const BuildOptions kF64{Device::CPU, DType::F64};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class BlasLtMlp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

struct Shape {
  uint32_t in, neurons, hidden, out;
};

std::string describe(const Shape& s) {
  return std::to_string(s.in) + "->" + std::to_string(s.neurons) + "x" + std::to_string(s.hidden) + "->" +
         std::to_string(s.out);
}

// 64 and 128 wide (tensor-core friendly), odd widths at every layer, and depth 0.
const Shape kShapes[] = {{64, 64, 2, 64}, {128, 128, 2, 128}, {3, 7, 3, 5}, {32, 16, 0, 16}, {5, 8, 0, 3}};
const int64_t kBatches[] = {1, 16, 17, 255, 256, 257, 1000};

const char* otype_for(DType p) { return p == DType::F32 ? "BlasLtMLP" : "BlasLtMLPFP16"; }
// Relative L2 error allowed against the FP64 reference.
double tolerance(DType p) { return p == DType::F32 ? 1e-5 : 2e-3; }

json net_config(const std::string& otype, const Shape& s, const std::string& act, const std::string& out_act) {
  return {{"otype", otype},
          {"n_neurons", s.neurons},
          {"n_hidden_layers", s.hidden},
          {"activation", act},
          {"output_activation", out_act}};
}

double round_to(DType p, double v) {
  if (p == DType::F16) return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
  return static_cast<float>(v);
}

std::vector<double> random_rounded(Pcg32& rng, size_t n, DType p) {
  std::vector<double> v(n);
  for (auto& x : v) x = round_to(p, 2 * rng.next_double() - 1);
  return v;
}

// ||got - ref|| / ||ref|| over [begin, end) of the given index set (all when empty).
double rel_l2(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<size_t>& idx = {}) {
  double num = 0, den = 0;
  auto add = [&](size_t i) {
    const double d = got[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  };
  if (idx.empty())
    for (size_t i = 0; i < ref.size(); ++i) add(i);
  else
    for (size_t i : idx) add(i);
  if (!std::isfinite(num)) return std::numeric_limits<double>::infinity();
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}


bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}

using tinyfuse::testing::DeviceMatrix;

struct Case {
  DType precision;
  Shape shape;
  std::string act, out_act;
  int64_t batch;
  bool strided;
  uint64_t seed;
};

std::string describe(const Case& c) {
  return std::string(otype_for(c.precision)) + " " + describe(c.shape) + " " + c.act + "/" + c.out_act + " batch " +
         std::to_string(c.batch) + (c.strided ? " strided" : "");
}

std::vector<double> rounded16(std::vector<double> v) {
  for (auto& x : v) x = round_to(DType::F16, x);
  return v;
}

// The FP16 reference (see the top of the file): the network's layers as depth-0 FP64 PortableMLPs
// with activation None (the products and biases), activations applied in FP64 on the host, and
// FP16 rounding wherever BlasLtMLPFP16 stores a value.
void fp16_storage_reference(const Network& net, int64_t batch, const std::vector<double>& params,
                            const std::vector<double>& input, const std::vector<double>& dout,
                            std::vector<double>& out, std::vector<double>& dx_out, std::vector<double>& grads) {
  const auto segs = net.param_segments();  // W0, b0, W1, b1, ...
  const size_t n_layers = segs.size() / 2;
  std::vector<std::unique_ptr<Network>> layers(n_layers);
  std::vector<std::unique_ptr<Context>> ctxs(n_layers);
  std::vector<std::vector<double>> x(n_layers + 1), z16(n_layers), layer_params(n_layers), layer_grads(n_layers);
  x[0] = input;
  auto act_of = [&](size_t l) { return l + 1 == n_layers ? net.output_activation() : net.activation(); };
  for (size_t l = 0; l < n_layers; ++l) {
    const ParamSegment& w = segs[2 * l];
    const ParamSegment& b = segs[2 * l + 1];
    const uint32_t in = w.fan_in, width = w.fan_out;
    layers[l] = create_network(net_config("PortableMLP", {in, width, 0, width}, "None", "None"), in, width, kF64);
    layer_params[l].assign(params.begin() + w.offset, params.begin() + b.offset + b.count);
    layer_grads[l].assign(layer_params[l].size(), 0.0);
    const TensorView lp = TensorView::vector(layer_params[l].data(), layer_params[l].size());
    layers[l]->set_params(lp, lp, TensorView::vector(layer_grads[l].data(), layer_grads[l].size()));
    std::vector<double> z(batch * width);
    const TensorView zv = TensorView::matrix(z.data(), batch, width);
    ctxs[l] = layers[l]->forward(TensorView::matrix(x[l].data(), batch, in), &zv);
    z16[l] = rounded16(z);
    std::vector<double> y(z.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = activate(act_of(l), z16[l][i]);
    x[l + 1] = rounded16(y);
  }
  out = x[n_layers];
  std::vector<double> dy = dout;
  for (size_t l = n_layers; l-- > 0;) {
    const ParamSegment& w = segs[2 * l];
    const uint32_t in = w.fan_in, width = w.fan_out;
    std::vector<double> dz(dy.size());
    for (size_t i = 0; i < dz.size(); ++i) dz[i] = dy[i] * activate_derivative(act_of(l), z16[l][i]);
    if (act_of(l) != Activation::None) dz = rounded16(dz);
    std::vector<double> dx(batch * in), yl(batch * width);
    const TensorView in_v = TensorView::matrix(x[l].data(), batch, in), dx_v = TensorView::matrix(dx.data(), batch, in);
    layers[l]->backward(*ctxs[l], in_v, TensorView::matrix(yl.data(), batch, width),
                        TensorView::matrix(dz.data(), batch, width), &dx_v);
    std::copy(layer_grads[l].begin(), layer_grads[l].end(), grads.begin() + w.offset);
    dy = l > 0 ? rounded16(dx) : dx;
  }
  dx_out = dy;
}

// Runs one configuration through every entry point and compares with the FP64 reference.
void check_case(const Case& c) {
  SCOPED_TRACE(describe(c));
  const DType p = c.precision;
  const Shape& s = c.shape;
  const int64_t batch = c.batch;
  std::unique_ptr<Network> gpu;
  try {
    gpu = create_network(net_config(otype_for(p), s, c.act, c.out_act), s.in, s.out, kGpu);
  } catch (const ConfigError& e) {
    // Allowed only as the documented, clear refusal of a width cuBLASLt cannot run.
    const std::string what = e.what();
    EXPECT_TRUE(e.key() == "network.n_neurons" || e.key() == "network.n_input_dims" || e.key() == "network.n_output_dims")
        << what;
    EXPECT_NE(what.find("multiples of"), std::string::npos) << what;
    return;
  }
  auto ref = create_network(net_config("PortableMLP", s, c.act, c.out_act), s.in, s.out, kF64);
  ASSERT_EQ(gpu->n_params(), ref->n_params());
  ASSERT_EQ(gpu->padded_output_width(), s.out);
  const size_t n = gpu->n_params();

  Pcg32 rng(c.seed);
  std::vector<float> init(n);
  // Stacked exponentials grow doubly exponentially: start them smaller (as the CPU tests do).
  gpu->initialize_params(rng, init.data(), c.act == "Exponential" ? 0.3f : 1.0f);
  // Initialisation zeroes the biases; random ones exercise the bias paths.
  std::vector<size_t> matrix_idx, bias_idx;
  for (const auto& seg : gpu->param_segments())
    for (size_t i = 0; i < seg.count; ++i) {
      if (seg.kind == ParamSegment::Kind::Vector) {
        init[seg.offset + i] = rng.next_float() - 0.5f;
        bias_idx.push_back(seg.offset + i);
      } else {
        matrix_idx.push_back(seg.offset + i);
      }
    }
  std::vector<double> params(n);
  for (size_t i = 0; i < n; ++i) params[i] = round_to(p, init[i]);
  const std::vector<double> input = random_rounded(rng, batch * s.in, p);
  const std::vector<double> dout = random_rounded(rng, batch * s.out, p);

  // FP64 reference.
  std::vector<double> ref_grads(n), ref_out(batch * s.out), ref_dx(batch * s.in);
  if (p == DType::F32) {
    std::vector<double> ref_params = params, ref_input = input, ref_dout = dout;
    ref->set_params(TensorView::vector(ref_params.data(), n), TensorView::vector(ref_params.data(), n),
                    TensorView::vector(ref_grads.data(), n));
    const TensorView rin = TensorView::matrix(ref_input.data(), batch, s.in);
    const TensorView rout = TensorView::matrix(ref_out.data(), batch, s.out);
    const TensorView rdx = TensorView::matrix(ref_dx.data(), batch, s.in);
    auto rctx = ref->forward(rin, &rout);
    ref->backward(*rctx, rin, rout, TensorView::matrix(ref_dout.data(), batch, s.out), &rdx);
  } else {
    fp16_storage_reference(*gpu, batch, params, input, dout, ref_out, ref_dx, ref_grads);
  }

  // GPU.
  const double tol = tolerance(p);
  Buffer pbuf(Device::CUDA, n * dtype_size(p)), gbuf(Device::CUDA, n * dtype_size(p));
  const TensorView pview = pbuf.vector(p, n), gview = gbuf.vector(p, n);
  upload(pview, params);
  gpu->set_params(pview, pview, gview);
  DeviceMatrix in(p, batch, s.in, c.strided), out(p, batch, s.out, c.strided), out2(p, batch, s.out, c.strided);
  DeviceMatrix dy(p, batch, s.out, c.strided), dx(p, batch, s.in, c.strided);
  upload(in.view, input);
  upload(dy.view, dout);

  out.poison();
  auto ctx = gpu->forward(in.view, &out.view);
  const std::vector<double> got_out = download(out.view);
  EXPECT_LE(rel_l2(got_out, ref_out), tol) << "forward";
  out2.poison();
  auto ctx2 = gpu->forward(in.view, &out2.view);
  EXPECT_TRUE(bitwise_equal(download(out2.view), got_out)) << "repeated forward differs";
  ctx2.reset();

  out.poison();
  gpu->inference(in.view, out.view);
  const std::vector<double> got_inf = download(out.view);
  EXPECT_LE(rel_l2(got_inf, ref_out), tol) << "inference";
  out.poison();
  gpu->inference(in.view, out.view);
  EXPECT_TRUE(bitwise_equal(download(out.view), got_inf)) << "repeated inference differs";

  // Overwrite.
  dx.poison();
  fill_tensor(gview, kNaN);
  gpu->backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Overwrite);
  const std::vector<double> got_dx = download(dx.view), got_grads = download(gview);
  EXPECT_LE(rel_l2(got_dx, ref_dx), tol) << "input gradient";
  EXPECT_LE(rel_l2(got_grads, ref_grads), tol) << "parameter gradient";
  EXPECT_LE(rel_l2(got_grads, ref_grads, matrix_idx), tol) << "weight gradient";
  EXPECT_LE(rel_l2(got_grads, ref_grads, bias_idx), tol) << "bias gradient";

  // Repeated: bitwise identical.
  dx.poison();
  fill_tensor(gview, kNaN);
  gpu->backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Overwrite);
  EXPECT_TRUE(bitwise_equal(download(dx.view), got_dx)) << "repeated input gradient differs";
  EXPECT_TRUE(bitwise_equal(download(gview), got_grads)) << "repeated parameter gradient differs";

  // Accumulate onto the gradients just written: twice the reference.
  gpu->backward(*ctx, in.view, out.view, dy.view, nullptr, false, GradientMode::Accumulate);
  std::vector<double> twice = ref_grads;
  for (auto& g : twice) g *= 2;
  EXPECT_LE(rel_l2(download(gview), twice), tol) << "accumulated parameter gradient";

  // Ignore: gradients untouched, input gradient still computed.
  fill_tensor(gview, 7.0);
  dx.poison();
  gpu->backward(*ctx, in.view, out.view, dy.view, &dx.view, false, GradientMode::Ignore);
  EXPECT_EQ(sum_tensor(gview), 7.0 * n) << "GradientMode::Ignore wrote gradients";
  EXPECT_TRUE(bitwise_equal(download(dx.view), got_dx)) << "input gradient with GradientMode::Ignore";

  // Overwrite without an input gradient (the first layer's dX product is skipped).
  fill_tensor(gview, kNaN);
  gpu->backward(*ctx, in.view, out.view, dy.view, nullptr, false, GradientMode::Overwrite);
  EXPECT_TRUE(bitwise_equal(download(gview), got_grads)) << "parameter gradient without dL_dinput";
}

const std::string kActivations[] = {"ReLU", "Tanh",     "Sigmoid",    "None",     "Sine",
                                    "SiLU", "LeakyReLU", "Squareplus", "Softplus", "Exponential"};

class BlasLtMlpActivations : public ::testing::TestWithParam<std::tuple<DType, std::string>> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_P(BlasLtMlpActivations, MatchesFp64Reference) {
  const auto& [precision, act] = GetParam();
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    // As the hidden activation, every batch size (dense views)...
    for (int64_t batch : kBatches) check_case({precision, s, act, "None", batch, false, seed++});
    // ... as the output activation behind Tanh hidden layers, and with strided views.
    for (int64_t batch : {17, 257}) {
      check_case({precision, s, "Tanh", act, batch, false, seed++});
      check_case({precision, s, act, "None", batch, true, seed++});
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(All, BlasLtMlpActivations,
                         ::testing::Combine(::testing::Values(DType::F32, DType::F16), ::testing::ValuesIn(kActivations)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == DType::F32 ? "F32_" : "F16_") +
                                  std::get<1>(info.param);
                         });

TEST_F(BlasLtMlp, LargeBatch) {
  for (DType p : {DType::F32, DType::F16})
    for (const Shape& s : {Shape{64, 64, 2, 64}, Shape{128, 128, 2, 128}})
      for (const char* act : {"ReLU", "Tanh"}) check_case({p, s, act, "None", 65536, false, 99});
}

TEST_F(BlasLtMlp, InitialisationAndLayoutMatchPortableMlp) {
  for (DType p : {DType::F32, DType::F16})
    for (const char* act : {"ReLU", "Sine"}) {
      const Shape s{3, 64, 2, 5};
      auto gpu = create_network(net_config(otype_for(p), s, act, "None"), s.in, s.out, kGpu);
      auto cpu = create_network(net_config("PortableMLP", s, act, "None"), s.in, s.out);
      ASSERT_EQ(gpu->n_params(), cpu->n_params());
      EXPECT_EQ(gpu->n_params(), 64u * 3 + 64 + 64 * 64 + 64 + 5 * 64 + 5);
      EXPECT_EQ(gpu->param_dtype(), p);
      EXPECT_EQ(gpu->input_dtype(), p);
      EXPECT_EQ(gpu->output_dtype(), p);
      EXPECT_EQ(gpu->device(), Device::CUDA);
      EXPECT_TRUE(gpu->has_biases());
      const auto gs = gpu->param_segments(), cs = cpu->param_segments();
      ASSERT_EQ(gs.size(), cs.size());
      for (size_t i = 0; i < gs.size(); ++i) {
        EXPECT_EQ(gs[i].offset, cs[i].offset);
        EXPECT_EQ(gs[i].count, cs[i].count);
        EXPECT_EQ(gs[i].kind, cs[i].kind);
      }
      std::vector<float> a(gpu->n_params()), b(cpu->n_params());
      Pcg32 r1(5), r2(5);
      gpu->initialize_params(r1, a.data(), 0.5f);
      cpu->initialize_params(r2, b.data(), 0.5f);
      EXPECT_EQ(a, b) << act;
    }
  // 64 -> 64 x 2 -> 64 has the documented 12,480 parameters.
  auto net = create_network(net_config("BlasLtMLP", {64, 64, 2, 64}, "ReLU", "None"), 64, 64, kGpu);
  EXPECT_EQ(net->n_params(), 12480u);
}

TEST_F(BlasLtMlp, RejectsBadArguments) {
  const Shape s{16, 32, 1, 8};
  auto net = create_network(net_config("BlasLtMLPFP16", s, "ReLU", "None"), s.in, s.out, kGpu);
  const size_t n = net->n_params();
  Buffer in_buf(Device::CUDA, 4 * s.in * 4), out_buf(Device::CUDA, 4 * s.out * 4);
  const TensorView in16 = in_buf.matrix(DType::F16, 4, s.in), out16 = out_buf.matrix(DType::F16, 4, s.out);
  EXPECT_THROW(net->inference(in16, out16), Error) << "no parameters set";
  Buffer pbuf(Device::CUDA, n * 4);
  EXPECT_THROW(net->set_params(pbuf.vector(DType::F32, n), pbuf.vector(DType::F32, n), {}), ShapeError);
  EXPECT_THROW(net->set_params(pbuf.vector(DType::F16, n - 1), pbuf.vector(DType::F16, n - 1), {}), ShapeError);
  net->set_params(pbuf.vector(DType::F16, n), pbuf.vector(DType::F16, n), {});
  fill_tensor(pbuf.vector(DType::F16, n), 0.0);
  EXPECT_THROW(net->inference(in_buf.matrix(DType::F32, 4, s.in), out16), ShapeError);  // dtype
  EXPECT_THROW(net->inference(in16, out_buf.matrix(DType::F16, 3, s.out)), ShapeError);  // rows
  EXPECT_THROW(net->inference(in_buf.matrix(DType::F16, 4, s.in + 1), out16), ShapeError);  // width
  std::vector<float> host(4 * s.in);
  EXPECT_THROW(net->inference(TensorView::matrix(host.data(), 4, s.in), out16), ShapeError);  // device
  auto ctx = net->forward(in16, &out16);
  EXPECT_THROW(net->backward(*ctx, in16, out16, out16, nullptr), Error) << "no gradient buffer";
  net->backward(*ctx, in16, out16, out16, nullptr, false, GradientMode::Ignore);  // fine without one
  EXPECT_THROW(net->backward(*ctx, in16.rows_slice(0, 2), out16, out_buf.matrix(DType::F16, 2, s.out), nullptr, false,
                             GradientMode::Ignore),
               ShapeError)
      << "batch differs from the forward";
  synchronize(Device::CUDA, nullptr);
}

}  // namespace
