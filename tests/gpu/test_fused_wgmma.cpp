// FullyFusedMLP inference through the Hopper kernel (src/cuda/fused/hopper/wgmma_kernel.cuh: wgmma
// warpgroup products) against the mma.sync pipelined kernel it replaces on compute capability
// 9.0 (a network built without the Hopper kernels, BuildOptions::fused_kernels). The two round at
// the same points and the tensor cores sum each 16-deep product the same way for both
// instructions: on the H200 all 4,343,552 outputs of the first version of this test matched bit
// for bit, so the test requires it (the FullyFusedMLP suite, test_fully_fused_mlp.cpp, checks inference on
// whichever kernel runs against its rounded-storage FP64 reference, and inference against
// forward bit for bit). Widths 64 and 128 (the kernel's), inputs narrower / wider than the hidden
// layers and not multiples of 64, outputs padded (5 -> 16) and wider than 16 but not the hidden
// width, depths 1-5 (five 128-wide layers fit three warpgroups a block only with one input stage a
// warp), ReLU / LeakyReLU / Tanh / Sine with None / Sigmoid outputs, batches 1 .. 300001, strided
// views, parameters off the 16-byte grid (the square kernel is for aligned ones); outputs poisoned
// with NaN first. The square 64-wide ReLU network runs on the kernel that moves whole tiles by
// tensor copies (hopper/tma_kernel.cuh) where its rows allow, else on the row-copying square
// instance (FusedKernelOptions::tma): both are checked, and which one ran. Runs
// on the device machine; skips without a GPU, and without a compute capability 9.0 device or sm_90a
// code in the build.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cuda/fused/fully_fused_mlp.h"
#include "cuda/primitives/tensor_maps.h"
#include "testing/device_matrix.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;
namespace fused = tinyfuse::cuda::fused;

namespace {

std::vector<double> download(const TensorView& t) {
  std::vector<double> host(static_cast<size_t>(t.numel()));
  copy_tensor(TensorView::matrix(host.data(), t.rows(), t.cols()), t);
  return host;
}
void upload(const TensorView& dst, std::vector<double> host) {
  copy_tensor(dst, dst.ndim == 1 ? TensorView::vector(host.data(), dst.numel())
                                 : TensorView::matrix(host.data(), dst.rows(), dst.cols()));
}

struct Case {
  DType precision;
  uint32_t in, width, hidden, out;
  const char *act, *out_act;
  int64_t batch;
  bool strided;
  int param_offset = 0;  // elements: the parameters start this far into their buffer
  bool wide_rows = false;  // rows 8 elements wider than the view, 16-byte aligned (tensor copies take them)
};

std::string describe(const Case& c) {
  return std::string(c.precision == DType::BF16 ? "bf16 " : "f16 ") + std::to_string(c.in) + "->" +
         std::to_string(c.width) + "x" + std::to_string(c.hidden) + "->" + std::to_string(c.out) + " " + c.act + "/" +
         c.out_act + " batch " + std::to_string(c.batch) + (c.strided ? " strided" : "") +
         (c.param_offset ? " params at +" + std::to_string(c.param_offset) : "") + (c.wide_rows ? " rows 8 wider" : "");
}

class FusedWgmma : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    if (prop.major != 9 || prop.minor != 0)
      GTEST_SKIP() << "skipped: the wgmma kernel runs on compute capability 9.0 only (this GPU is " << prop.major << "."
                   << prop.minor << ")";
    if (!fused::hopper_kernels_built())
      GTEST_SKIP() << "skipped: this build holds no sm_90a code (CMAKE_CUDA_ARCHITECTURES without 90)";
  }

  // Returns the number of elements that matched the mma.sync kernel bit for bit; `ran` gets the
  // kernel the Hopper network ran. tma: whether it may move tiles by tensor copies.
  int64_t check(const Case& c, uint64_t seed, fused::FusedKernel* ran = nullptr, bool tma = true) {
    SCOPED_TRACE(describe(c));
    const DType p = c.precision;
    json cfg = {{"otype", "FullyFusedMLP"},  {"n_neurons", c.width},          {"n_hidden_layers", c.hidden},
                {"activation", c.act},       {"output_activation", c.out_act}, {"precision", p == DType::BF16 ? "bf16" : "f16"}};
    BuildOptions hopper{Device::CUDA}, mma_only{Device::CUDA};
    hopper.fused_kernels.tma = tma;
    mma_only.fused_kernels.hopper = false;
    auto gpu = create_network(cfg, c.in, c.out, hopper);
    auto mma_net = create_network(cfg, c.in, c.out, mma_only);
    const size_t n = gpu->n_params();
    const uint32_t W = gpu->padded_output_width();
    Pcg32 rng(seed);
    std::vector<float> init(n);
    gpu->initialize_params(rng, init.data());
    Buffer pbuf(Device::CUDA, (n + c.param_offset) * dtype_size(p));
    const TensorView pview = TensorView::vector(static_cast<char*>(pbuf.data()) + c.param_offset * dtype_size(p), p,
                                                Device::CUDA, static_cast<int64_t>(n));
    upload(pview, std::vector<double>(init.begin(), init.end()));
    gpu->set_params(pview, pview, {});
    mma_net->set_params(pview, pview, {});

    std::vector<double> input(static_cast<size_t>(c.batch) * c.in);
    for (auto& x : input) x = 2 * rng.next_double() - 1;
    const int64_t pad = c.wide_rows ? 8 : c.strided ? 3 : 0, offset = c.strided ? 1 : 0;
    tinyfuse::testing::DeviceMatrix in(p, c.batch, c.in, pad, offset), out(p, c.batch, W, pad, offset);
    upload(in.view, input);

    out.poison();
    gpu->inference(in.view, out.view);
    const std::vector<double> got = download(out.view);
    const fused::FusedKernel kernel = cuda::fused_kernel_used(*gpu, fused::FusedPass::Inference);
    if (ran) *ran = kernel;
    EXPECT_TRUE(kernel == fused::FusedKernel::Wgmma || kernel == fused::FusedKernel::WgmmaTma)
        << "the Hopper network ran " << fused::to_string(kernel);
    out.poison();
    gpu->inference(in.view, out.view);
    const std::vector<double> again = download(out.view);
    out.poison();
    mma_net->inference(in.view, out.view);
    const std::vector<double> mma = download(out.view);
    // The mma.sync reference: the pipelined kernel, or the general one where the layers do not fit
    // its shared memory (five 128-wide layers).
    const fused::FusedKernel reference = cuda::fused_kernel_used(*mma_net, fused::FusedPass::Inference);
    EXPECT_TRUE(reference == fused::FusedKernel::Pipelined || reference == fused::FusedKernel::General)
        << "the reference network ran " << fused::to_string(reference);

    // FP16 / BF16 -> double is exact, so equal doubles are equal bits (and -0 stays apart from +0).
    int64_t unwritten = 0, same = 0;
    size_t first_diff = got.size();
    for (size_t i = 0; i < got.size(); ++i) {
      unwritten += std::isnan(got[i]) ? 1 : 0;
      const bool eq = std::memcmp(&got[i], &mma[i], sizeof(double)) == 0;
      same += eq ? 1 : 0;
      if (!eq && first_diff == got.size()) first_diff = i;
    }
    EXPECT_EQ(unwritten, 0) << "elements the wgmma kernel left unwritten (or NaN)";
    EXPECT_EQ(same, static_cast<int64_t>(got.size()))
        << "wgmma vs mma.sync kernel: first difference at element " << first_diff << ": " << got[first_diff] << " vs "
        << mma[first_diff];
    EXPECT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(double)), 0) << "repeated inference differs";
    if (pad) {  // the padding columns around the view stay poisoned
      out.poison();
      gpu->inference(in.view, out.view);
      const std::vector<double> whole = download(out.whole);
      bool untouched = true;
      for (int64_t r = 0; r < c.batch; ++r)
        for (int64_t col = 0; col < W + pad; ++col)
          if (col < offset || col >= offset + W) untouched &= std::isnan(whole[r * (W + pad) + col]);
      EXPECT_TRUE(untouched) << "inference wrote outside the output view";
    }
    return same;
  }
};

const Case kShapes[] = {
    {DType::F16, 64, 64, 2, 64, "", "", 0, false},     // the benchmark shape
    {DType::F16, 128, 128, 2, 128, "", "", 0, false},  // the benchmark shape
    {DType::F16, 32, 64, 3, 5, "", "", 0, false},      // narrow input (one partial 64-column block), padded output
    {DType::F16, 96, 128, 1, 48, "", "", 0, false},    // input over two blocks, output in 16-column pieces
    {DType::F16, 16, 64, 4, 32, "", "", 0, false},
    {DType::F16, 256, 64, 2, 16, "", "", 0, false},    // the widest input the pipelined kernels take
    {DType::F16, 128, 128, 5, 3, "", "", 0, false},    // W2's network: 164 KB of weights, one input stage a warp
};

TEST_F(FusedWgmma, MatchesTheMmaKernelAndTheReference) {
  uint64_t seed = 1;
  int64_t same = 0, total = 0;
  for (DType p : {DType::F16, DType::BF16})
    for (Case c : kShapes)
      for (auto acts : {std::make_pair("ReLU", "None"), std::make_pair("Tanh", "Sigmoid"), std::make_pair("Sine", "None"),
                        std::make_pair("LeakyReLU", "Sigmoid")})
        for (int64_t batch : {1, 17, 255, 256, 257, 1000}) {
          c.precision = p;
          c.act = acts.first;
          c.out_act = acts.second;
          c.batch = batch;
          same += check(c, seed++);
          total += batch * ((c.out + 15) / 16 * 16);
          if (HasFatalFailure()) return;
        }
  std::printf("wgmma vs mma.sync inference: %lld of %lld elements bit for bit\n", static_cast<long long>(same),
              static_cast<long long>(total));
}

// Parameters off the 16-byte grid: the square kernel (aligned weights only) is not chosen and the
// general one stages the weights element by element; still the mma.sync kernels' bits.
TEST_F(FusedWgmma, ParametersOffTheSixteenByteGridStillMatch) {
  uint64_t seed = 1000;
  for (DType p : {DType::F16, DType::BF16})
    for (Case c : {kShapes[0], kShapes[1]})
      for (int offset : {1, 4})
        for (int64_t batch : {1, 257, 1000}) {
          c.precision = p;
          c.act = "ReLU";
          c.out_act = "None";
          c.batch = batch;
          c.param_offset = offset;
          check(c, seed++);
          if (HasFatalFailure()) return;
        }
}

// Many tiles per warpgroup (the persistent loop and its stages: two a warp, one for W2's shape), and
// strided (staged) views.
TEST_F(FusedWgmma, LargeBatchesAndStridedViews) {
  uint64_t seed = 500;
  for (Case c : kShapes) {
    c.act = "ReLU";
    c.out_act = "None";
    c.batch = 300001;
    check(c, seed++);
    c.precision = DType::BF16;
    c.act = "Tanh";
    c.out_act = "Sigmoid";
    c.batch = 1000;
    c.strided = true;
    check(c, seed++);
  }
}

}  // namespace

namespace {

// The square 64-wide ReLU network on Hopper has two kernels: whole tiles by tensor copies
// (hopper/tma_kernel.cuh), and the row-copying one it falls back to (left out here, or rows
// the copy engine cannot describe; FullyFusedMLP hands kernels 16-byte aligned rows with strides
// of a multiple of 8 elements, so in practice only batches past 2^31 rows). Both must give the
// mma.sync kernels' bits, with partial last tiles, wide rows used in place (a row stride the
// tensor copies must follow, padding that must stay untouched) and staged strided views.
TEST_F(FusedWgmma, TensorCopyKernelAndItsFallbackMatch) {
  uint64_t seed = 2000;
  for (DType p : {DType::F16, DType::BF16})
    for (int64_t batch : {1, 63, 64, 65, 1000, 65537})
      for (int layout = 0; layout < 3; ++layout)
        for (bool tma : {true, false}) {
          Case c = kShapes[0];
          c.precision = p;
          c.act = "ReLU";
          c.out_act = "None";
          c.batch = batch;
          c.strided = layout == 1;
          c.wide_rows = layout == 2;
          fused::FusedKernel ran = fused::FusedKernel::None;
          check(c, seed++, &ran, tma);
          if (HasFatalFailure()) return;
          if (tma)
            EXPECT_EQ(ran, fused::FusedKernel::WgmmaTma) << describe(c) << ": the tensor-copy kernel did not run";
          else
            EXPECT_EQ(ran, fused::FusedKernel::Wgmma) << describe(c) << ": the tensor-copy kernel ran though switched off";
        }
}

}  // namespace

namespace {

// The tensor maps the TMA kernel's launcher remembers (row_tiles, tensor_maps.h) must be the
// driver's encoding of the same rows byte for byte, whether found among the thread's recent maps
// or encoded anew after being pushed out, and rows the copy engine cannot describe stay refused.
TEST_F(FusedWgmma, RememberedTensorMapsEqualFreshEncodings) {
  void* base = nullptr;
  ASSERT_EQ(cudaMalloc(&base, 1 << 20), cudaSuccess);
  char* rows = static_cast<char*>(base);
  // Twelve layouts (more than the eight remembered), each asked for three times, in two orders.
  std::vector<std::pair<int64_t, int64_t>> keys;  // (byte offset, rows); ld 64 or 72 by parity
  for (int i = 0; i < 12; ++i) keys.push_back({int64_t{256} * i, 100 + 37 * i});
  for (int pass = 0; pass < 3; ++pass)
    for (int j = 0; j < 12; ++j) {
      const int i = pass == 1 ? 11 - j : j;
      const int64_t ld = i % 2 ? 72 : 64;
      CUtensorMap want{}, got{};
      ASSERT_TRUE(fused::encode_row_tiles(&want, rows + keys[i].first, keys[i].second, ld));
      ASSERT_TRUE(fused::row_tiles(&got, rows + keys[i].first, keys[i].second, ld));
      EXPECT_EQ(std::memcmp(&want, &got, sizeof(CUtensorMap)), 0) << "layout " << i << ", pass " << pass;
    }
  CUtensorMap m{};
  EXPECT_FALSE(fused::row_tiles(&m, rows + 8, 100, 64)) << "rows not 16-byte aligned";
  EXPECT_FALSE(fused::row_tiles(&m, rows, 100, 68)) << "a row stride of 136 bytes";
  EXPECT_EQ(cudaFree(base), cudaSuccess);
}

}  // namespace
