// The CPU backend's engine parts: the host scratch cache, the matrix products shared across the
// worker pool, and the dispatched elementwise passes (bitwise what activation_math.h computes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/activation_math.h"
#include "core/host_scratch.h"
#include "cpu/blas.h"
#include "cpu/elementwise.h"
#include "tinyfuse/tinyfuse.h"

using namespace tinyfuse;

namespace {

TEST(HostScratch, LargeBlocksAreReusedSmallOnesAreNot) {
  host_scratch_trim();
  const size_t big = size_t{3} << 20;
  void* a = host_scratch_alloc(big, "test");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, big);
  host_scratch_free(a);
  EXPECT_GE(host_scratch_cached_bytes(), big);
  void* b = host_scratch_alloc(big - 100, "test");  // fits the kept block
  EXPECT_EQ(b, a);
  EXPECT_EQ(host_scratch_cached_bytes(), 0u);
  host_scratch_free(b);
  void* c = host_scratch_alloc(big / 4, "test");  // far smaller: a block of its own
  EXPECT_NE(c, a);
  host_scratch_free(c);
  void* small = host_scratch_alloc(100, "test");
  const size_t before = host_scratch_cached_bytes();
  host_scratch_free(small);
  EXPECT_EQ(host_scratch_cached_bytes(), before) << "small blocks go back to the C library";
  EXPECT_EQ(host_scratch_alloc(0, "test"), nullptr);
  free_temporary_memory();
  EXPECT_EQ(host_scratch_cached_bytes(), 0u);
}

TEST(HostScratch, ImpossibleRequestIsOutOfMemory) {
  EXPECT_THROW(host_scratch_alloc(SIZE_MAX - 8, "an impossible block"), OutOfMemoryError);
}

TEST(HostScratch, TrainingStepsReuseTheirScratch) {
  const json config = {{"loss", {{"otype", "L2"}}},
                       {"optimizer", {{"otype", "Adam"}}},
                       {"encoding", {{"otype", "HashGrid"}, {"n_levels", 4}, {"log2_hashmap_size", 12}}},
                       {"network", {{"otype", "PortableMLP"}, {"n_neurons", 64}, {"n_hidden_layers", 2}}}};
  Model m = create_from_config(2, 3, config, {}, 7);
  const int64_t batch = 4096;
  std::vector<float> x(batch * 2, 0.25f), y(batch * 3, 0.5f);
  auto step = [&] {
    m.trainer->training_step(TensorView::matrix(x.data(), batch, 2), TensorView::matrix(y.data(), batch, 3));
  };
  step();
  const size_t kept = host_scratch_cached_bytes();
  EXPECT_GT(kept, 0u) << "a step's scratch is kept for the next";
  step();
  EXPECT_EQ(host_scratch_cached_bytes(), kept) << "the next step takes the same blocks back, none new";
}

// C = op(A) op(B) in double, the reference.
std::vector<double> reference_product(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const std::vector<float>& a,
                                      int64_t lda, const std::vector<float>& b, int64_t ldb) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * n + j] = s;
    }
  return c;
}

TEST(CpuGemm, SharedProductsMatchTheFp64Reference) {
  struct Shape {
    int64_t m, n, k;
  };
  // Split by rows, split by columns, a product too small to split, and an odd row count.
  for (const Shape s : {Shape{4099, 64, 64}, Shape{16, 8192, 32}, Shape{33, 17, 5}, Shape{70001, 16, 3}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        Pcg32 rng(uint64_t(s.m * 31 + s.n + ta * 7 + tb * 3));
        const int64_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 1, ldc = s.n + 2;
        std::vector<float> a((ta ? s.k : s.m) * lda), b((tb ? s.n : s.k) * ldb), c(s.m * ldc, NAN);
        for (auto& v : a) v = rng.next_float() - 0.5f;
        for (auto& v : b) v = rng.next_float() - 0.5f;
        cpu::gemm(ta, tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), ldc);
        const auto ref = reference_product(ta, tb, s.m, s.n, s.k, a, lda, b, ldb);
        double worst = 0;
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) worst = std::max(worst, std::abs(c[i * ldc + j] - ref[i * s.n + j]));
        EXPECT_LT(worst, 1e-5 * s.k) << s.m << "x" << s.n << "x" << s.k << " ta " << ta << " tb " << tb;
        for (int64_t i = 0; i < s.m; ++i)  // the padding between rows of C stays untouched
          ASSERT_TRUE(std::isnan(c[i * ldc + s.n]));
      }
}

// The same bits, except that any NaN equals any NaN: which operand's payload and sign a NaN
// result carries depends on the order the compiler gives a commutative operation's operands,
// which differs between builds (the sanitizer build's scalar reference showed it).
template <typename T>
bool same_bits(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <typename T>
void check_passes_are_the_scalar_definition() {
  const T specials[] = {T(0), -T(0), T(1e-30), -T(3), T(2.5), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN()};
  for (const std::string& name : activation_names())
    for (const uint32_t w : {1u, 3u, 16u, 17u, 64u}) {
      const Activation act = parse_activation(name, "activation");
      const int64_t rows = 37, ldy = w + 5;
      Pcg32 rng(w * 13 + static_cast<uint64_t>(act));
      std::vector<T> z(rows * w), bias(w), dy(rows * ldy), y(rows * w), dz(rows * w);
      for (size_t i = 0; i < z.size(); ++i) z[i] = i % 7 == 0 ? specials[i / 7 % 8] : T(8 * rng.next_float() - 4);
      for (auto& v : bias) v = T(rng.next_float() - 0.5f);
      for (auto& v : dy) v = T(rng.next_float() - 0.5f);
      std::vector<T> z_in = z;
      cpu::bias_activate(act, z.data(), y.data(), bias.data(), 0, rows, w);
      cpu::activation_backward(act, dy.data(), ldy, z.data(), dz.data(), 2, rows, w);
      for (int64_t r = 0; r < rows; ++r)
        for (uint32_t o = 0; o < w; ++o) {
          const size_t i = r * w + o;
          const T zz = z_in[i] + bias[o];
          ASSERT_TRUE(same_bits(z[i], zz)) << name << " w " << w << " z";
          ASSERT_TRUE(same_bits(y[i], activate(act, zz))) << name << " w " << w << " y at " << double(zz);
          if (r >= 2)
            ASSERT_TRUE(same_bits(dz[i], T(dy[r * ldy + o] * activate_derivative(act, zz))))
                << name << " w " << w << " dz at " << double(zz);
        }
      std::vector<T> y2(rows * w), z2 = z_in;
      cpu::bias_activate(act, z2.data(), y2.data(), nullptr, 0, rows, w);  // no bias: z stays
      for (size_t i = 0; i < z2.size(); ++i) ASSERT_TRUE(same_bits(z2[i], z_in[i]));
    }
}

TEST(CpuElementwise, DispatchedPassesAreBitwiseTheScalarDefinition) {
  SCOPED_TRACE(cpu::elementwise_isa());
  check_passes_are_the_scalar_definition<float>();
  check_passes_are_the_scalar_definition<double>();
}

}  // namespace
