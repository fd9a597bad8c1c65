// Tensor views, buffers and the host half/bfloat16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/half.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

TEST(Half, RoundTripsAndRoundsToNearestEven) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /* min normal */, 5.9604645e-08f /* min subnormal */})
    EXPECT_EQ(half_bits_to_float(float_to_half_bits(f)), f) << f;
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(half_bits_to_float(float_to_half_bits(1.0f + 0.00048828125f)), 1.0f);
  EXPECT_EQ(half_bits_to_float(float_to_half_bits(1.0f + 3 * 0.00048828125f)), 1.0f + 4 * 0.00048828125f);
  EXPECT_TRUE(std::isinf(half_bits_to_float(float_to_half_bits(70000.0f))));
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()))));
  // Every half value survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaNs
    EXPECT_EQ(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(h))), h);
  }
}

TEST(Bf16, RoundTrips) {
  for (float f : {0.0f, 1.0f, -3.0f, 1e30f, 1e-30f}) {
    float back = bf16_bits_to_float(float_to_bf16_bits(f));
    EXPECT_NEAR(back, f, std::abs(f) / 128);
  }
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Tensor, SlicesAndCopies) {
  std::vector<float> a(12);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  auto m = TensorView::matrix(a.data(), 3, 4);
  EXPECT_TRUE(m.contiguous());
  auto s = m.cols_slice(1, 2);
  EXPECT_FALSE(s.contiguous());
  EXPECT_TRUE(s.rows_dense());
  std::vector<double> d(6, -1);
  copy_tensor(TensorView::matrix(d.data(), 3, 2), s);
  EXPECT_EQ(d, (std::vector<double>{1, 2, 5, 6, 9, 10}));
  EXPECT_DOUBLE_EQ(sum_tensor(s), 33.0);
  EXPECT_THROW(m.cols_slice(3, 2), ShapeError);
  EXPECT_THROW(m.rows_slice(2, 2), ShapeError);
  fill_tensor(m.rows_slice(1, 1), 7.0);
  EXPECT_EQ(a[4], 7.0f);
  EXPECT_EQ(a[8], 8.0f);
}

TEST(Tensor, CheckMatrixNamesTheArgument) {
  std::vector<float> a(8);
  try {
    check_matrix(TensorView::matrix(a.data(), 2, 4), "target", 2, 3, DType::F32, Device::CPU);
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("target"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("3 columns"), std::string::npos);
  }
}

TEST(Buffer, CpuAllocationAndGpuWithoutBackend) {
  Buffer b(Device::CPU, 100);
  EXPECT_NE(b.data(), nullptr);
  b.reserve(50);
  EXPECT_EQ(b.bytes(), 100u);
#ifndef TINYFUSE_WITH_CUDA
  EXPECT_THROW(Buffer(Device::CUDA, 16), UnsupportedError);
#endif
}

TEST(Pcg32, IsDeterministicAndInRange) {
  Pcg32 a(1337), b(1337), c(1338);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    float x = a.next_float();
    EXPECT_EQ(x, b.next_float());
    EXPECT_GE(x, 0.0f);
    EXPECT_LT(x, 1.0f);
    differs |= x != c.next_float();
  }
  EXPECT_TRUE(differs);
}
