// Qualification of the fused 64 -> 64 x 2 -> 64 ReLU inference paths, parameterised over
// Width64FusedMLP (biases) and FullyFusedMLP (no biases, output padded to 16 = 64 here):
// correctness against the CPU FP64 reference at the named batches, a 20-size batch matrix and
// every tile boundary from 256 to 1024 (with the rows past the batch checked untouched), 64
// bitwise-identical launches, tile-prefix invariance, strided views, parameter hot swap A -> B ->
// A, two instances on two non-default streams, CUDA-graph capture and replay beside another
// stream, the PortableMLP and BlasLtMLPFP16 backends beside it, rejection of training on the
// inference-only path, and two fresh-process runs writing byte-identical JSON.
//
// Reference. The CPU network with the same parameter layout in FP64 (BuildOptions{CPU, F64}):
// PortableMLP for Width64FusedMLP (docs/PARAMETERS.md: one layout), the CPU FullyFusedMLP for
// FullyFusedMLP, given the same parameters and inputs as rounded to the GPU network's dtypes. It
// is end-to-end FP64: the GPU rounds its hidden activations and outputs to FP16 and the
// reference does not, which the FP16 tolerances cover (max abs <= 5e-3, normalised L2 <= 2e-3;
// forward only, so no activation-kink gradient effects). Outputs are poisoned (NaN) before each run.
//
// A case whose otype has no CUDA implementation in this build (FullyFusedMLP before the fused
// branch is merged) is skipped with the factory's message. Runs on the device machine; every
// case skips without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "core/half.h"
#include "cuda/gpu_runtime.h"
#include "gpu/fused_test_support.h"
#include "testing/graph_capture.h"

#ifndef TINYFUSE_FUSED_DETERMINISM_EXE
#error "tests/CMakeLists.txt defines TINYFUSE_FUSED_DETERMINISM_EXE (the path of tinyfuse_fused_determinism)"
#endif

using namespace tinyfuse;
using namespace tinyfuse::testing;

namespace {

constexpr double kMaxAbs = 5e-3;   // FP16 inference vs the FP64 reference
constexpr double kRelL2 = 2e-3;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Values as the GPU network stores them (its dtype), as double.
std::vector<double> as_stored(const std::vector<float>& v, DType t) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = t == DType::F16 ? half_bits_to_float(float_to_half_bits(v[i])) : static_cast<double>(v[i]);
  return out;
}

struct Errors {
  double max_abs = 0, rel_l2 = 0;
  bool finite = true;
};
Errors compare(const std::vector<double>& got, const std::vector<double>& ref, size_t count) {
  Errors e;
  double num = 0, den = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(got[i])) e.finite = false;
    const double d = got[i] - ref[i];
    e.max_abs = std::max(e.max_abs, std::abs(d));
    num += d * d;
    den += ref[i] * ref[i];
  }
  e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

// A device matrix with `extra` rows after the `rows` the view shows (to catch writes past the
// batch); strided: the view is columns [1, 1 + cols) of a matrix 3 columns wider.
struct DeviceMatrix {
  Buffer buffer;
  TensorView whole, view;
  DeviceMatrix(DType t, int64_t rows, int64_t cols, Stream stream = nullptr, int64_t extra = 0, bool strided = false) {
    const int64_t width = strided ? cols + 3 : cols;
    buffer = Buffer(Device::CUDA, static_cast<size_t>(std::max<int64_t>(1, (rows + extra) * width)) * dtype_size(t));
    whole = buffer.matrix(t, rows + extra, width, stream);
    view = (strided ? whole.cols_slice(1, cols) : whole).rows_slice(0, rows);
  }
  void poison() { fill_tensor(whole, kNaN); }
};

class FusedQualification : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    std::string why_not;
    net_ = create_fused_network(GetParam(), why_not);
    if (!net_) GTEST_SKIP() << why_not;
    ASSERT_EQ(net_->input_width(), kFusedWidth);
    ASSERT_EQ(net_->padded_output_width(), kFusedWidth);
    ref_ = create_network(fused_network_config(reference_otype()), kFusedWidth, kFusedWidth, {Device::CPU, DType::F64});
    ASSERT_EQ(ref_->n_params(), net_->n_params()) << "the reference must have the same layout";
    params_a_ = fused_test_params(*net_, 7);
    params_b_ = fused_test_params(*net_, 8);
    device_params_ = std::make_unique<DeviceParams>(*net_, params_a_);
  }

  // Same layout on the CPU: PortableMLP where the network has biases, else the same otype.
  std::string reference_otype() const { return net_->has_biases() ? "PortableMLP" : GetParam(); }
  DType in_t() const { return net_->input_dtype(); }
  DType out_t() const { return net_->output_dtype(); }

  // Seeded inputs of `rows`, as the network stores them.
  std::vector<float> inputs(int64_t rows, uint64_t seed) const {
    std::vector<float> x = fused_test_inputs(rows, seed);
    const std::vector<double> s = as_stored(x, in_t());
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(s[i]);
    return x;
  }

  // The FP64 reference output for `x` (rows x 64) with host parameters `p`.
  std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& p) const {
    const int64_t rows = static_cast<int64_t>(x.size() / kFusedWidth);
    std::vector<double> params = as_stored(p, net_->param_dtype()), input(x.begin(), x.end()), out(x.size());
    const TensorView pv = TensorView::vector(params.data(), static_cast<int64_t>(params.size()));
    ref_->set_params(pv, pv, TensorView{});
    ref_->inference(TensorView::matrix(input.data(), rows, kFusedWidth), TensorView::matrix(out.data(), rows, kFusedWidth));
    return out;
  }

  void upload(const TensorView& dst, const std::vector<float>& x) const {
    copy_tensor(dst, TensorView::matrix(const_cast<float*>(x.data()), dst.rows(), dst.cols()));
  }

  // Runs `rows` seeded rows (output poisoned first) and checks them against the reference.
  void check_batch(int64_t rows, uint64_t seed) {
    SCOPED_TRACE(GetParam() + " batch " + std::to_string(rows));
    const std::vector<float> x = inputs(rows, seed);
    DeviceMatrix in(in_t(), rows, kFusedWidth), out(out_t(), rows, kFusedWidth, nullptr, 16);
    upload(in.view, x);
    out.poison();
    const std::vector<unsigned char> guard_before = download_bytes(out.whole.rows_slice(rows, 16));
    net_->inference(in.view, out.view);
    const Errors e = compare(download_values(out.view), reference(x, params_a_), x.size());
    EXPECT_TRUE(e.finite) << "an output row was not written";
    EXPECT_LE(e.max_abs, kMaxAbs);
    EXPECT_LE(e.rel_l2, kRelL2);
    EXPECT_EQ(download_bytes(out.whole.rows_slice(rows, 16)), guard_before) << "rows past the batch were written";
  }

  std::unique_ptr<Network> net_, ref_;
  std::vector<float> params_a_, params_b_;
  std::unique_ptr<DeviceParams> device_params_;
};

TEST_P(FusedQualification, MatchesCpuReferenceAtNamedBatches) {
  for (int64_t b : {1, 16, 17, 255, 256, 257}) check_batch(b, 100 + static_cast<uint64_t>(b));
}

// 20 sizes: below, at and above the 16- and 32-row tiles and the warp/block counts, and large
// batches where every warp runs many tiles (the double-buffered path).
TEST_P(FusedQualification, MatchesCpuReferenceOverTwentyBatchSizes) {
  for (int64_t b : {2, 3, 15, 31, 32, 33, 63, 64, 65, 127, 128, 129, 511, 1000, 4095, 4097, 65535, 65537, 262147, 524295})
    check_batch(b, 300 + static_cast<uint64_t>(b));
}

// Every 16-row boundary b in [256, 1024], at b - 1, b and b + 1: each batch is the first rows of
// one input, checked against the same reference rows, with the rows past it untouched.
TEST_P(FusedQualification, EveryPaddingBoundaryFrom256To1024) {
  const int64_t max_rows = 1025, extra = 15;
  const std::vector<float> x = inputs(max_rows, 11);
  const std::vector<double> ref = reference(x, params_a_);
  DeviceMatrix in(in_t(), max_rows, kFusedWidth), out(out_t(), max_rows, kFusedWidth, nullptr, extra);
  upload(in.view, x);
  for (int64_t boundary = 256; boundary <= 1024; boundary += 16)
    for (int64_t rows : {boundary - 1, boundary, boundary + 1}) {
      SCOPED_TRACE("batch " + std::to_string(rows));
      out.poison();
      const TensorView tail = out.whole.rows_slice(rows, max_rows + extra - rows);
      const std::vector<unsigned char> tail_before = download_bytes(tail);
      net_->inference(in.view.rows_slice(0, rows), out.view.rows_slice(0, rows));
      const Errors e = compare(download_values(out.view.rows_slice(0, rows)), ref, static_cast<size_t>(rows) * kFusedWidth);
      EXPECT_TRUE(e.finite);
      EXPECT_LE(e.max_abs, kMaxAbs);
      EXPECT_LE(e.rel_l2, kRelL2);
      EXPECT_EQ(download_bytes(tail), tail_before) << "rows past the batch were written";
      if (HasFailure()) return;
    }
}

TEST_P(FusedQualification, SixtyFourLaunchesAreBitwiseIdentical) {
  const int64_t rows = 100003;
  DeviceMatrix in(in_t(), rows, kFusedWidth), out(out_t(), rows, kFusedWidth);
  upload(in.view, inputs(rows, 12));
  out.poison();
  net_->inference(in.view, out.view);
  const std::vector<unsigned char> first = download_bytes(out.view);
  for (int i = 1; i < 64; ++i) {
    out.poison();
    net_->inference(in.view, out.view);
    ASSERT_EQ(download_bytes(out.view), first) << "launch " << i << " differs from the first";
  }
}

// A row's output does not depend on the batch it is in: the first rows of a large batch
// (many tiles per warp) are bitwise those of each smaller batch (one or a few tiles).
TEST_P(FusedQualification, PrefixOfALargerBatchIsBitwiseTheSmallerBatch) {
  const int64_t large = 524295;
  DeviceMatrix in(in_t(), large, kFusedWidth), out(out_t(), large, kFusedWidth);
  upload(in.view, inputs(large, 13));
  out.poison();
  net_->inference(in.view, out.view);
  const std::vector<unsigned char> all = download_bytes(out.view);
  const size_t row_bytes = kFusedWidth * dtype_size(out_t());
  for (int64_t rows : {1, 17, 255, 257, 4099, 65537}) {
    DeviceMatrix small(out_t(), rows, kFusedWidth);
    small.poison();
    net_->inference(in.view.rows_slice(0, rows), small.view);
    const std::vector<unsigned char> got = download_bytes(small.view);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin(), all.begin() + static_cast<int64_t>(rows * row_bytes)))
        << "batch " << rows << " differs from the first rows of batch " << large;
  }
}

// Rows further apart than their width, pointers only element-aligned: the same bits as dense
// views, and the columns around the view untouched.
TEST_P(FusedQualification, StridedViewsMatchDenseBitwise) {
  const int64_t rows = 4099;
  const std::vector<float> x = inputs(rows, 14);
  DeviceMatrix in(in_t(), rows, kFusedWidth), out(out_t(), rows, kFusedWidth);
  DeviceMatrix sin(in_t(), rows, kFusedWidth, nullptr, 0, true), sout(out_t(), rows, kFusedWidth, nullptr, 0, true);
  upload(in.view, x);
  upload(sin.view, x);
  out.poison();
  sout.poison();
  net_->inference(in.view, out.view);
  try {
    net_->inference(sin.view, sout.view);
  } catch (const ShapeError& e) {
    GTEST_SKIP() << GetParam() << " takes dense rows only: " << e.what();
  }
  EXPECT_EQ(download_bytes(sout.view), download_bytes(out.view));
  const std::vector<double> left = download_values(sout.whole.cols_slice(0, 1));
  const std::vector<double> right = download_values(sout.whole.cols_slice(1 + kFusedWidth, 2));
  for (double v : left) EXPECT_TRUE(std::isnan(v)) << "column before the view written";
  for (double v : right) EXPECT_TRUE(std::isnan(v)) << "column after the view written";
}

// New values in the same parameter buffer take effect at the next call; back to A gives A's
// bits again; so does pointing the network at another buffer.
TEST_P(FusedQualification, ParameterHotSwapAToBToA) {
  const int64_t rows = 4097;
  DeviceMatrix in(in_t(), rows, kFusedWidth), out(out_t(), rows, kFusedWidth);
  upload(in.view, inputs(rows, 15));
  auto run = [&](Network& n) {
    out.poison();
    n.inference(in.view, out.view);
    return download_bytes(out.view);
  };
  const std::vector<unsigned char> a = run(*net_);
  device_params_->upload(params_b_, net_->param_dtype());
  const std::vector<unsigned char> b = run(*net_);
  EXPECT_NE(a, b);
  std::string why_not;
  auto fresh_b = create_fused_network(GetParam(), why_not);
  ASSERT_TRUE(fresh_b) << why_not;
  DeviceParams pb(*fresh_b, params_b_);
  EXPECT_EQ(run(*fresh_b), b) << "after the swap the network must compute exactly B";
  device_params_->upload(params_a_, net_->param_dtype());
  EXPECT_EQ(run(*net_), a) << "swapping back must restore A's bits";
  // Pointing at another buffer (B's) and back.
  const DType t = net_->param_dtype();
  net_->set_params(pb.view(t), pb.view(t), TensorView{});
  EXPECT_EQ(run(*net_), b);
  net_->set_params(device_params_->view(t), device_params_->view(t), TensorView{});
  EXPECT_EQ(run(*net_), a);
  const Errors e = compare(download_values(out.view), reference(inputs(rows, 15), params_a_), rows * kFusedWidth);
  EXPECT_LE(e.rel_l2, kRelL2);
}

// RAII non-blocking streams through the vendor header.
struct Streams {
  gpuStream_t s[2] = {nullptr, nullptr};
  Streams() {
    for (auto& x : s) TF_GPU_CHECK(gpuStreamCreateWithFlags(&x, gpuStreamNonBlocking));
  }
  ~Streams() {
    for (auto& x : s)
      if (x) (void)gpuStreamDestroy(x);
  }
};

TEST_P(FusedQualification, TwoInstancesOnTwoNonDefaultStreams) {
  Streams st;
  std::string why_not;
  auto other = create_fused_network(GetParam(), why_not);
  ASSERT_TRUE(other) << why_not;
  DeviceParams pb(*other, params_b_);
  const int64_t rows = 65537;
  DeviceMatrix in1(in_t(), rows, kFusedWidth, st.s[0]), out1(out_t(), rows, kFusedWidth, st.s[0]);
  DeviceMatrix in2(in_t(), rows, kFusedWidth, st.s[1]), out2(out_t(), rows, kFusedWidth, st.s[1]);
  upload(in1.view, inputs(rows, 16));
  upload(in2.view, inputs(rows, 17));
  net_->inference(in1.view, out1.view);
  const std::vector<unsigned char> alone1 = download_bytes(out1.view);
  other->inference(in2.view, out2.view);
  const std::vector<unsigned char> alone2 = download_bytes(out2.view);
  out1.poison();
  out2.poison();
  for (int i = 0; i < 20; ++i) {  // queued back to back on both streams, no host waits
    net_->inference(in1.view, out1.view);
    other->inference(in2.view, out2.view);
  }
  EXPECT_EQ(download_bytes(out1.view), alone1);
  EXPECT_EQ(download_bytes(out2.view), alone2);
  const Errors e = compare(download_values(out2.view), reference(inputs(rows, 17), params_b_), rows * kFusedWidth);
  EXPECT_LE(e.max_abs, kMaxAbs);
  EXPECT_LE(e.rel_l2, kRelL2);
}

// inference() captured into a CUDA graph on the input's stream: capturing runs nothing, each
// replay computes from the buffers' contents at replay time, and replays interleaved with
// another instance on a second stream leave both results exact.
TEST_P(FusedQualification, GraphReplayAndStreamIsolation) {
  Streams st;
  const int64_t rows = 65537;
  DeviceMatrix in(in_t(), rows, kFusedWidth, st.s[0]), out(out_t(), rows, kFusedWidth, st.s[0]);
  const std::vector<float> x1 = inputs(rows, 18), x2 = inputs(rows, 19);
  upload(in.view, x1);
  net_->inference(in.view, out.view);
  const std::vector<unsigned char> direct1 = download_bytes(out.view);
  upload(in.view, x2);
  net_->inference(in.view, out.view);
  const std::vector<unsigned char> direct2 = download_bytes(out.view);

  upload(in.view, x1);
  out.poison();
  const std::vector<unsigned char> poisoned = download_bytes(out.view);
  tinyfuse::testing::CapturedGraph captured(st.s[0], gpuStreamCaptureModeThreadLocal,
                                            [&] { net_->inference(in.view, out.view); });
  ASSERT_EQ(captured.failure(), "");
  EXPECT_EQ(download_bytes(out.view), poisoned) << "capturing must not run the network";

  for (int i = 0; i < 10; ++i) TF_GPU_CHECK(captured.launch(st.s[0]));
  EXPECT_EQ(download_bytes(out.view), direct1) << "replay differs from a direct call";
  upload(in.view, x2);
  out.poison();
  TF_GPU_CHECK(captured.launch(st.s[0]));
  EXPECT_EQ(download_bytes(out.view), direct2) << "a replay must read the input buffer's current contents";

  // Replays on stream 0 interleaved with a second instance on stream 1.
  std::string why_not;
  auto other = create_fused_network(GetParam(), why_not);
  ASSERT_TRUE(other) << why_not;
  DeviceParams pb(*other, params_b_);
  DeviceMatrix in_b(in_t(), rows, kFusedWidth, st.s[1]), out_b(out_t(), rows, kFusedWidth, st.s[1]);
  upload(in_b.view, x1);
  other->inference(in_b.view, out_b.view);
  const std::vector<unsigned char> alone_b = download_bytes(out_b.view);
  out.poison();
  out_b.poison();
  for (int i = 0; i < 20; ++i) {
    TF_GPU_CHECK(captured.launch(st.s[0]));
    other->inference(in_b.view, out_b.view);
  }
  EXPECT_EQ(download_bytes(out.view), direct2);
  EXPECT_EQ(download_bytes(out_b.view), alone_b);
}

// PortableMLP (FP32) and BlasLtMLPFP16 built and run beside the fused network: each correct,
// and the fused network's bits unchanged by them. With biases they get the same parameters
// (the same layout) and are checked against the same reference.
TEST_P(FusedQualification, PortableAndBlasBackendsBeside) {
  const int64_t rows = 4097;
  const std::vector<float> x = inputs(rows, 20);
  DeviceMatrix in(in_t(), rows, kFusedWidth), out(out_t(), rows, kFusedWidth);
  upload(in.view, x);
  net_->inference(in.view, out.view);
  const std::vector<unsigned char> fused = download_bytes(out.view);
  const std::vector<double> ref = reference(x, params_a_);

  for (const char* otype : {"PortableMLP", "BlasLtMLPFP16"}) {
    SCOPED_TRACE(otype);
    auto other = create_network(fused_network_config(otype), kFusedWidth, kFusedWidth, {Device::CUDA});
    const bool same_layout = net_->has_biases();
    std::vector<float> p = fused_test_params(*other, 21);
    if (same_layout) {
      const std::vector<double> stored = as_stored(params_a_, net_->param_dtype());
      p.assign(stored.begin(), stored.end());
    }
    DeviceParams po(*other, p);
    DeviceMatrix oin(other->input_dtype(), rows, kFusedWidth), oout(other->output_dtype(), rows, kFusedWidth);
    upload(oin.view, x);
    oout.poison();
    other->inference(oin.view, oout.view);
    const std::vector<double> got = download_values(oout.view);
    if (same_layout) {
      const Errors e = compare(got, ref, got.size());
      EXPECT_LE(e.rel_l2, other->param_dtype() == DType::F32 ? 1e-5 : kRelL2);
    } else {
      for (double v : got) ASSERT_TRUE(std::isfinite(v));
    }
    out.poison();
    net_->inference(in.view, out.view);
    EXPECT_EQ(download_bytes(out.view), fused) << "the fused network's output changed beside " << otype;
  }
}

// The inference-only path refuses training and wrong tensors with clear errors; a network
// that trains gets its forward() checked against inference() instead.
TEST_P(FusedQualification, RejectsTrainingOnTheInferenceOnlyPathAndWrongTensors) {
  const int64_t rows = 33;
  DeviceMatrix in(in_t(), rows, kFusedWidth), out(out_t(), rows, kFusedWidth);
  upload(in.view, inputs(rows, 22));
  if (GetParam() == "Width64FusedMLP") {
    try {
      net_->forward(in.view, &out.view);
      ADD_FAILURE() << "forward() ran on the inference-only path";
    } catch (const UnsupportedError& e) {
      EXPECT_NE(std::string(e.what()).find("inference-only"), std::string::npos) << e.what();
    }
    Context dummy;
    EXPECT_THROW(net_->backward(dummy, in.view, out.view, out.view, nullptr), UnsupportedError);
    json cfg = {{"loss", {{"otype", "L2"}}}, {"optimizer", {{"otype", "Adam"}}}, {"network", fused_network_config(GetParam())}};
    Model m = create_from_config(kFusedWidth, kFusedWidth, cfg, {Device::CUDA});
    Buffer target(Device::CUDA, rows * kFusedWidth * sizeof(float));
    const TensorView tv = target.matrix(DType::F32, rows, kFusedWidth);
    fill_tensor(tv, 0.5);
    EXPECT_THROW(m.trainer->training_step(in.view, tv), UnsupportedError);
  } else {
    out.poison();
    auto ctx = net_->forward(in.view, &out.view);
    const Errors e = compare(download_values(out.view), reference(inputs(rows, 22), params_a_), rows * kFusedWidth);
    EXPECT_TRUE(e.finite);
    EXPECT_LE(e.max_abs, kMaxAbs) << "forward()";
    EXPECT_LE(e.rel_l2, kRelL2) << "forward()";
  }
  // Wrong dtype, width or batch: ShapeError naming the argument.
  DeviceMatrix in32(DType::F32, rows, kFusedWidth), narrow(in_t(), rows, 32), short_out(out_t(), rows - 1, kFusedWidth);
  EXPECT_THROW(net_->inference(in32.view, out.view), ShapeError);
  EXPECT_THROW(net_->inference(narrow.view, out.view), ShapeError);
  EXPECT_THROW(net_->inference(in.view, short_out.view), ShapeError);
  Buffer f32(Device::CUDA, net_->n_params() * sizeof(float));
  const TensorView pv = f32.vector(DType::F32, static_cast<int64_t>(net_->n_params()));
  if (net_->param_dtype() != DType::F32) {
    EXPECT_THROW(net_->set_params(pv, pv, TensorView{}), ShapeError);
  }
  std::string why_not;
  auto unset = create_fused_network(GetParam(), why_not);
  ASSERT_TRUE(unset);
  EXPECT_THROW(unset->inference(in.view, out.view), Error) << "inference without parameters";
}

// The determinism program: $TINYFUSE_FUSED_DETERMINISM_EXE, else beside this test program
// (as scripts/gpu/prepare_carry.sh gathers them), else where the build put it.
std::string determinism_program() {
  if (const char* e = std::getenv("TINYFUSE_FUSED_DETERMINISM_EXE"); e && *e) return e;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    const std::string beside = dir + "tinyfuse_fused_determinism";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  return TINYFUSE_FUSED_DETERMINISM_EXE;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// tinyfuse_fused_determinism twice, each in a fresh process: byte-identical JSON files, whose
// digests equal this process's own run of the same seeds (a third process).
TEST_P(FusedQualification, FreshProcessRunsWriteByteIdenticalJson) {
  const std::string dir = ::testing::TempDir();
  std::string files[2];
  for (int i = 0; i < 2; ++i) {
    files[i] = dir + "tinyfuse_fused_determinism_" + GetParam() + "_" + std::to_string(i) + ".json";
    std::remove(files[i].c_str());
    const std::string cmd = "\"" + determinism_program() + "\" --otype " + GetParam() +
                            " --out \"" + files[i] + "\"";
    const int status = std::system(cmd.c_str());
    ASSERT_NE(status, -1) << cmd;
    ASSERT_TRUE(WIFEXITED(status)) << cmd;
    ASSERT_EQ(WEXITSTATUS(status), 0) << cmd;
  }
  const std::string a = read_file(files[0]), b = read_file(files[1]);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b) << "two fresh processes wrote different results";
  const json doc = json::parse(a);
  EXPECT_EQ(doc.at("otype"), GetParam());
  ASSERT_EQ(doc.at("runs").size(), determinism_batches().size());
  DeviceParams p(*net_, fused_test_params(*net_, kDeterminismParamSeed));
  for (size_t i = 0; i < determinism_batches().size(); ++i)
    EXPECT_EQ(doc["runs"][i], determinism_record(*net_, determinism_batches()[i]))
        << "this process computes other bits than the fresh processes at batch " << determinism_batches()[i];
}

INSTANTIATE_TEST_SUITE_P(Fused, FusedQualification, ::testing::Values("Width64FusedMLP", "FullyFusedMLP"),
                         [](const auto& info) { return info.param; });

}  // namespace
