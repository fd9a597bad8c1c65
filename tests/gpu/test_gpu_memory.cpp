// GPU memory through the core's device-neutral API: allocation, strided copies both ways,
// dtype conversion on the way, fill and sum. Runs on the device machine; skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

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
