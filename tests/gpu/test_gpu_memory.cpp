// GPU memory through the core's device-neutral API: allocation, strided copies both ways,
// dtype conversion on the way, fill and sum. Runs on the device machine; skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "cuda/gpu_runtime.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

class GpuMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "skipped: no GPU";
  }
};

TEST_F(GpuMemory, RoundTripStridedWithConversion) {
  const int64_t rows = 37, cols = 5;
  std::vector<float> host(rows * cols);
  Pcg32 rng(1);
  for (auto& v : host) v = rng.next_float() * 2 - 1;
  Buffer dev(Device::CUDA, rows * 8 * sizeof(float));
  fill_tensor(dev.matrix(DType::F32, rows, 8), -999.0);  // poison
  TensorView wide = dev.matrix(DType::F32, rows, 8).cols_slice(2, cols);
  copy_tensor(wide, TensorView::matrix(host.data(), rows, cols));
  std::vector<double> back(rows * cols, NAN);
  copy_tensor(TensorView::matrix(back.data(), rows, cols), wide);
  for (size_t i = 0; i < host.size(); ++i) EXPECT_EQ(back[i], host[i]);
  std::vector<float> all(rows * 8);
  copy_tensor(TensorView::matrix(all.data(), rows, 8), dev.matrix(DType::F32, rows, 8));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 8; ++c)
      if (c < 2 || c >= 2 + cols) EXPECT_EQ(all[r * 8 + c], -999.0f) << "copy wrote outside its view";
  double expected = 0;
  for (float v : host) expected += v;
  EXPECT_NEAR(sum_tensor(wide), expected, 1e-9);
}

// Copies between F32, F16 and BF16 with a device side convert on the device (one kernel; the
// host side staged in its own dtype): every direction and pair, through padded (strided) device
// views and a strided host view, must give bit for bit what the host's conversion gives (NaN: a
// NaN), on values that round (ties, subnormals, overflow to Inf, Inf, signed zeros).
TEST_F(GpuMemory, ConvertingCopiesEqualTheHostsConversionBitForBit) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  const int64_t rows = 1031, cols = 3, pad = 8;
  std::vector<float> values(rows * cols);
  Pcg32 rng(5);
  const float specials[] = {0.0f, -0.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, 65520.0f, 1e-7f, -3e-8f,
                            6e-5f, 3.4e38f, INFINITY, -INFINITY, NAN, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256};
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = i < std::size(specials) ? specials[i] : (rng.next_float() * 2 - 1) * std::ldexp(1.0f, int(i % 40) - 20);
  auto host_bits = [](const TensorView& t) {  // (host view) each element's bits, 0 for NaN
    std::vector<double> v(static_cast<size_t>(t.numel()));
    copy_tensor(TensorView::matrix(v.data(), t.rows(), t.cols()), t);
    std::vector<uint64_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) std::memcpy(&b[i], &v[i], 8), b[i] = std::isnan(v[i]) ? 0 : b[i];
    return b;
  };
  // `cols` columns from `first` of a (rows, pad) device matrix of `t` held by `b`, poisoned (NaN).
  auto padded = [&](Buffer& b, DType t, int64_t first) {
    b = Buffer(Device::CUDA, rows * pad * dtype_size(t));
    fill_tensor(b.matrix(t, rows, pad), NAN);
    return b.matrix(t, rows, pad).cols_slice(first, cols);
  };
  // A device view's bits, read back through a dense host copy in its own dtype.
  auto device_bits = [&](const TensorView& v) {
    Buffer back(Device::CPU, rows * cols * dtype_size(v.dtype));
    copy_tensor(back.matrix(v.dtype, rows, cols), v);
    return host_bits(back.matrix(v.dtype, rows, cols));
  };
  for (DType from : types)
    for (DType to : types) {
      if (from == to) continue;
      SCOPED_TRACE(to_string(from) + " -> " + to_string(to));
      // The source in `from`, on the host (made by the host path from the FP32 values).
      Buffer src_host(Device::CPU, rows * cols * dtype_size(from)), want(Device::CPU, rows * cols * dtype_size(to));
      const TensorView sh = src_host.matrix(from, rows, cols), wh = want.matrix(to, rows, cols);
      copy_tensor(sh, TensorView::matrix(values.data(), rows, cols));
      copy_tensor(wh, sh);  // the host's conversion: the expected bits
      const std::vector<uint64_t> expected = host_bits(wh);

      // host -> device (converting) into a padded view, then device -> host in the same dtype.
      Buffer dev, dev_src, dev_dst;
      const TensorView dv = padded(dev, to, 1);
      copy_tensor(dv, sh);
      EXPECT_EQ(device_bits(dv), expected) << "host -> device";

      // device (padded, `from`) -> host (`to`), into a strided host view.
      const TensorView ds = padded(dev_src, from, 2);
      copy_tensor(ds, sh);
      Buffer wide(Device::CPU, rows * pad * dtype_size(to));
      const TensorView hv = wide.matrix(to, rows, pad).cols_slice(3, cols);
      copy_tensor(hv, ds);
      EXPECT_EQ(host_bits(hv), expected) << "device -> strided host";

      // device -> device between dtypes.
      const TensorView dd = padded(dev_dst, to, 4);
      copy_tensor(dd, ds);
      EXPECT_EQ(device_bits(dd), expected) << "device -> device";
      std::vector<double> padding(rows * pad);
      copy_tensor(TensorView::matrix(padding.data(), rows, pad), dev_dst.matrix(to, rows, pad));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < pad; ++c)
          if (c < 4 || c >= 4 + cols) ASSERT_TRUE(std::isnan(padding[r * pad + c])) << "wrote outside its view at " << r << ", " << c;
    }
}

TEST_F(GpuMemory, HalfFillAndOutOfMemoryIsAnError) {
  Buffer dev(Device::CUDA, 64 * 2);
  fill_tensor(dev.vector(DType::F16, 64), 0.5);
  EXPECT_DOUBLE_EQ(sum_tensor(dev.vector(DType::F16, 64)), 32.0);
  EXPECT_THROW(Buffer(Device::CUDA, size_t(1) << 50), Error);
  Buffer after(Device::CUDA, 1024);  // the process keeps working after an out-of-memory error
  fill_tensor(after.vector(DType::F32, 256), 1.0);
  EXPECT_DOUBLE_EQ(sum_tensor(after.vector(DType::F32, 256)), 256.0);
}

// Scratch memory is cached in each GPU's default pool (release threshold raised): every device a
// process uses must get it, not only the first (DDP-style one GPU per thread or process).
TEST_F(GpuMemory, EveryDeviceKeepsItsScratchPool) {
  if (gpu_count() < 2) GTEST_SKIP() << "skipped: needs 2 GPUs, " << gpu_count() << " visible";
  int previous = 0;
  TF_GPU_CHECK(gpuGetDevice(&previous));
  for (int device = 0; device < gpu_count(); ++device) {
    TF_GPU_CHECK(gpuSetDevice(device));
    {
      Buffer scratch = Buffer::on_stream(Device::CUDA, 1 << 20, nullptr);
      fill_tensor(scratch.vector(DType::F32, 256), 1.0);
      EXPECT_DOUBLE_EQ(sum_tensor(scratch.vector(DType::F32, 256)), 256.0);
    }
    gpuMemPool_t pool;
    TF_GPU_CHECK(gpuDeviceGetDefaultMemPool(&pool, device));
    uint64_t threshold = 0;
    TF_GPU_CHECK(gpuMemPoolGetAttribute(pool, gpuMemPoolAttrReleaseThreshold, &threshold));
    EXPECT_EQ(threshold, UINT64_MAX) << "device " << device << "'s pool returns scratch memory on every sync";
  }
  TF_GPU_CHECK(gpuSetDevice(previous));
}

}  // namespace
