// The AMD fused kernels' fragment index code (src/cuda/primitives/amd_fragment_layout.h: the
// gathers that fill A / B operand registers from LDS, the accumulator element -> (row, column) map
// the epilogues use) run lane by lane through an emulated wave that executes the matrix
// instructions as AMD documents their register layouts:
//   - RDNA3 (gfx11) v_wmma_f32_16x16x16_f16, wave32: A / B 16-bit values packed two per VGPR, VGPR
//     v of lane l holds row (A) / column (B) l % 16, k = 2v, 2v + 1; lanes 16..31 must repeat lanes
//     0..15. D: VGPR v of lane l holds D[2v + l / 16][l % 16];
//   - RDNA4 (gfx12), wave32: VGPR v of lane l holds k = 8 (l / 16) + 2v, +1 of row / column
//     l % 16; D: VGPR v of lane l holds D[8 (l / 16) + v][l % 16];
//   - CDNA v_mfma_f32_16x16x16f16, wave64: value j of lane l is k = 4 (l / 16) + j of row /
//     column l % 16; D: value j of lane l is D[4 (l / 16) + j][l % 16].
// The emulator's tables are written here from the ISA documents, independently of the header.
// The emulated kernel computations are the Width64FusedMLP forward (three 64-wide layers) and the
// FullyFusedMLP backward product (dZ W with the weights as stored), compared with a plain row-major
// FP32 computation bit for bit: the emulated instruction sums its 16 products in ascending k into
// the accumulator, as the reference does (the products of two FP16 values are exact in FP32; the
// hardware's own summation order is what only a card shows). A kernel built for one layout and run
// under another must fail here.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "cuda/primitives/amd_fragment_layout.h"

namespace {

using tinyfuse::cuda::amd::FragmentLayout;
using tinyfuse::cuda::amd::MatrixIsa;
constexpr int kF = tinyfuse::cuda::amd::kFrag;

float round_half(float v) { return tinyfuse::half_bits_to_float(tinyfuse::float_to_half_bits(v)); }

struct Pos {
  int row, col;
};

// The documented layouts (ISA references), as the emulated hardware reads and writes registers.
// operand(isa, lane, j): which (row or column index, k) value j of the lane's operand holds;
// acc(isa, lane, j): which D[m][n] accumulator value j of the lane holds.
struct Documented {
  MatrixIsa isa;
  int wave() const { return isa == MatrixIsa::CdnaMfma ? 64 : 32; }
  int operand_values() const { return isa == MatrixIsa::Gfx11Wmma ? 16 : isa == MatrixIsa::Gfx12Wmma ? 8 : 4; }
  int acc_values() const { return isa == MatrixIsa::CdnaMfma ? 4 : 8; }
  // Returns {row-or-column, k}.
  Pos operand(int lane, int j) const {
    const int vgpr = j / 2, half = j % 2;  // WMMA: two 16-bit values per VGPR, low half first
    switch (isa) {
      case MatrixIsa::Gfx11Wmma: return {lane % 16, 2 * vgpr + half};
      case MatrixIsa::Gfx12Wmma: return {lane % 16, 8 * (lane / 16) + 2 * vgpr + half};
      case MatrixIsa::CdnaMfma: return {lane % 16, 4 * (lane / 16) + j};
    }
    return {-1, -1};
  }
  Pos acc(int lane, int vgpr) const {
    switch (isa) {
      case MatrixIsa::Gfx11Wmma: return {2 * vgpr + lane / 16, lane % 16};
      case MatrixIsa::Gfx12Wmma: return {8 * (lane / 16) + vgpr, lane % 16};
      case MatrixIsa::CdnaMfma: return {4 * (lane / 16) + vgpr, lane % 16};
    }
    return {-1, -1};
  }
};

// One wave's registers for one fragment: [lane][value].
using Regs = std::vector<std::vector<float>>;

// D = A B + C on the emulated wave. Sets `undefined` when gfx11's two half-waves disagree on an
// operand (the ISA requires lanes 16..31 to repeat lanes 0..15).
Regs emulate_mma(const Documented& hw, const Regs& a, const Regs& b, const Regs& c, bool& undefined) {
  float A[kF][kF], B[kF][kF], C[kF][kF];
  bool seenA[kF][kF] = {}, seenB[kF][kF] = {};
  for (int l = 0; l < hw.wave(); ++l)
    for (int j = 0; j < hw.operand_values(); ++j) {
      const Pos pa = hw.operand(l, j), pb = hw.operand(l, j);
      float& ea = A[pa.row][pa.col];  // A[m][k]
      float& eb = B[pb.col][pb.row];  // B[k][n]
      if (seenA[pa.row][pa.col] && std::memcmp(&ea, &a[l][j], sizeof(float)) != 0) undefined = true;
      if (seenB[pb.col][pb.row] && std::memcmp(&eb, &b[l][j], sizeof(float)) != 0) undefined = true;
      ea = a[l][j], eb = b[l][j];
      seenA[pa.row][pa.col] = seenB[pb.col][pb.row] = true;
    }
  for (int l = 0; l < hw.wave(); ++l)
    for (int v = 0; v < hw.acc_values(); ++v) C[hw.acc(l, v).row][hw.acc(l, v).col] = c[l][v];
  Regs d(hw.wave(), std::vector<float>(hw.acc_values()));
  for (int l = 0; l < hw.wave(); ++l)
    for (int v = 0; v < hw.acc_values(); ++v) {
      const Pos p = hw.acc(l, v);
      float s = C[p.row][p.col];
      for (int k = 0; k < kF; ++k) s += A[p.row][k] * B[k][p.col];
      d[l][v] = s;
    }
  return d;
}

// The kernels' product loop (wmma_layers_hip.cuh's product / product_untransposed) for one 16-row
// block and 16 output columns, on the emulated wave, with the kernel's gathers for layout L.
// x: rows (row stride ldx); w: the B operand's source; transposed: W is (out x in) and B = W^T
// (gather_b_col_major), otherwise B = W as stored (gather_b_row_major). Returns the accumulator
// registers.
template <class L>
Regs product(const Documented& hw, const float* x, int ldx, const float* w, int ldw, int k, bool transposed,
             bool& undefined) {
  Regs acc(L::kWave, std::vector<float>(L::kAccElems, 0.0f));
  for (int k0 = 0; k0 < k; k0 += kF) {
    // 16 values per lane, the most any layout holds; those L does not fill stay NaN, so a layout
    // that reads more than the kernel's code wrote shows up as wrong outputs.
    Regs a(L::kWave, std::vector<float>(16, NAN)), b = a;
    for (int l = 0; l < L::kWave; ++l) {
      tinyfuse::cuda::amd::gather_a<L>(a[l].data(), x + k0, ldx, l);
      if (transposed)
        tinyfuse::cuda::amd::gather_b_col_major<L>(b[l].data(), w + k0, ldw, l);
      else
        tinyfuse::cuda::amd::gather_b_row_major<L>(b[l].data(), w + static_cast<size_t>(k0) * ldw, ldw, l);
    }
    acc = emulate_mma(hw, a, b, acc, undefined);
  }
  return acc;
}

// FP16 values (as floats) of a random normal distribution.
std::vector<float> random_halves(size_t n, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = round_half(d(rng));
  return v;
}

// Width64FusedMLP's forward on 16 rows, as its HIP kernel runs it (width64_kernel_hip.cuh: per
// layer the product over the rows in LDS, then the epilogue per accumulator value at
// (acc_row, acc_col): bias, FP16 rounding, ReLU on the hidden layers, back into the rows), under
// kernel layout L on hardware `hw`. Counts outputs that differ from the reference bit for bit.
template <class L>
int width64_mismatches(MatrixIsa hw_isa, bool& undefined) {
  const Documented hw{hw_isa};
  constexpr int W = 64, ld = W + 8, rows = 16;
  std::mt19937 rng(31);
  std::vector<float> weights[3], bias[3];
  for (int l = 0; l < 3; ++l) weights[l] = random_halves(W * W, 0.2f, rng), bias[l] = random_halves(W, 0.1f, rng);
  const std::vector<float> input = random_halves(rows * W, 1.0f, rng);

  std::vector<float> lds(rows * ld, NAN), w_lds[3];  // the wave's rows; weights with padded rows
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < W; ++c) lds[r * ld + c] = input[r * W + c];
  for (int l = 0; l < 3; ++l) {
    w_lds[l].assign(W * ld, NAN);
    for (int r = 0; r < W; ++r)
      for (int c = 0; c < W; ++c) w_lds[l][r * ld + c] = weights[l][r * W + c];
  }
  std::vector<float> out(rows * W, NAN);
  for (int layer = 0; layer < 3; ++layer) {
    std::vector<Regs> acc;
    for (int n = 0; n < W / kF; ++n)
      acc.push_back(product<L>(hw, lds.data(), ld, w_lds[layer].data() + n * kF * ld, ld, W, true, undefined));
    for (int n = 0; n < W / kF; ++n)  // the epilogue, after every product of the layer
      for (int lane = 0; lane < L::kWave; ++lane)
        for (int i = 0; i < L::kAccElems; ++i) {
          const int r = L::acc_row(lane, i), col = n * kF + L::acc_col(lane, i);
          const float z = round_half(acc[n][lane][i] + bias[layer][col]);
          const float y = layer < 2 ? (z > 0.0f ? z : 0.0f) : z;
          (layer < 2 ? lds[r * ld + col] : out[r * W + col]) = y;
        }
  }

  // Reference: row-major, FP32 sums in ascending k from zero, then the bias; FP16 rounding.
  std::vector<float> act = input;
  for (int layer = 0; layer < 3; ++layer) {
    std::vector<float> next(rows * W);
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < W; ++o) {
        float s = 0.0f;
        for (int k = 0; k < W; ++k) s += act[r * W + k] * weights[layer][o * W + k];
        const float z = round_half(s + bias[layer][o]);
        next[r * W + o] = layer < 2 ? (z > 0.0f ? z : 0.0f) : z;
      }
    act = next;
  }
  int bad = 0;
  for (int i = 0; i < rows * W; ++i) bad += std::memcmp(&out[i], &act[i], sizeof(float)) != 0;
  return bad;
}

// FullyFusedMLP's backward product dY = dZ W (W: out x in, as stored, the B operand read
// row-major) for 16 rows and 64 inputs, as backward_hip.cuh runs it, then the epilogue's element
// map. Counts values that differ from the reference.
template <class L>
int backward_mismatches(MatrixIsa hw_isa, bool& undefined) {
  const Documented hw{hw_isa};
  constexpr int W = 64, ld = W + 8, rows = 16;
  std::mt19937 rng(7);
  const std::vector<float> w = random_halves(W * W, 0.2f, rng), dz = random_halves(rows * W, 1.0f, rng);
  std::vector<float> w_lds(W * ld, NAN), dz_lds(rows * ld, NAN);
  for (int r = 0; r < W; ++r)
    for (int c = 0; c < W; ++c) w_lds[r * ld + c] = w[r * W + c];
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < W; ++c) dz_lds[r * ld + c] = dz[r * W + c];
  std::vector<float> dy(rows * W, NAN);
  for (int n = 0; n < W / kF; ++n) {
    const Regs acc = product<L>(hw, dz_lds.data(), ld, w_lds.data() + n * kF, ld, W, false, undefined);
    for (int lane = 0; lane < L::kWave; ++lane)
      for (int i = 0; i < L::kAccElems; ++i) dy[L::acc_row(lane, i) * W + n * kF + L::acc_col(lane, i)] = acc[lane][i];
  }
  int bad = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < W; ++c) {
      float s = 0.0f;
      for (int k = 0; k < W; ++k) s += dz[r * W + k] * w[k * W + c];
      bad += std::memcmp(&s, &dy[r * W + c], sizeof(float)) != 0;
    }
  return bad;
}

// Properties the device code relies on: each lane's operand values are consecutive k (one vector
// load per lane from operand_run_offset, 16-byte aligned up to the run's size when the row stride
// is a multiple of 8), and every accumulator element is held by exactly one lane.
template <class L>
void check_layout_properties() {
  for (int lane = 0; lane < L::kWave; ++lane) {
    for (int i = 0; i < L::kOperandElems; ++i) EXPECT_EQ(L::operand_k(lane, i), L::operand_k(lane, 0) + i);
    const int run_bytes = 2 * L::kOperandElems, align = run_bytes < 16 ? run_bytes : 16;
    EXPECT_EQ(tinyfuse::cuda::amd::operand_run_offset<L>(lane, 72) * 2 % align, 0) << "lane " << lane;
  }
  int held[kF][kF] = {};
  for (int lane = 0; lane < L::kWave; ++lane)
    for (int i = 0; i < L::kAccElems; ++i) ++held[L::acc_row(lane, i)][L::acc_col(lane, i)];
  for (auto& row : held)
    for (int h : row) EXPECT_EQ(h, 1);
}

using Gfx11 = FragmentLayout<MatrixIsa::Gfx11Wmma>;
using Gfx12 = FragmentLayout<MatrixIsa::Gfx12Wmma>;
using Cdna = FragmentLayout<MatrixIsa::CdnaMfma>;

TEST(AmdFragmentLayout, PropertiesTheDeviceLoadsRelyOn) {
  check_layout_properties<Gfx11>();
  check_layout_properties<Gfx12>();
  check_layout_properties<Cdna>();
}

TEST(AmdFragmentLayout, Width64ForwardMatchesReferenceBitForBit) {
  bool undefined = false;
  EXPECT_EQ(width64_mismatches<Gfx12>(MatrixIsa::Gfx12Wmma, undefined), 0) << "gfx12 (RDNA4)";
  EXPECT_EQ(width64_mismatches<Gfx11>(MatrixIsa::Gfx11Wmma, undefined), 0) << "gfx11 (RDNA3)";
  EXPECT_EQ(width64_mismatches<Cdna>(MatrixIsa::CdnaMfma, undefined), 0) << "CDNA (MFMA)";
  EXPECT_FALSE(undefined) << "gfx11 half-waves disagreed on an operand";
}

TEST(AmdFragmentLayout, BackwardProductMatchesReferenceBitForBit) {
  bool undefined = false;
  EXPECT_EQ(backward_mismatches<Gfx12>(MatrixIsa::Gfx12Wmma, undefined), 0) << "gfx12 (RDNA4)";
  EXPECT_EQ(backward_mismatches<Gfx11>(MatrixIsa::Gfx11Wmma, undefined), 0) << "gfx11 (RDNA3)";
  EXPECT_EQ(backward_mismatches<Cdna>(MatrixIsa::CdnaMfma, undefined), 0) << "CDNA (MFMA)";
  EXPECT_FALSE(undefined);
}

// Controls: the emulator tells the layouts apart. Code written for one RDNA generation's layout,
// run on the other, gives wrong outputs (or operands the hardware leaves undefined).
TEST(AmdFragmentLayout, WrongLayoutFails) {
  bool undefined = false;
  const int gfx11_code_on_gfx12 = width64_mismatches<Gfx11>(MatrixIsa::Gfx12Wmma, undefined);
  EXPECT_TRUE(gfx11_code_on_gfx12 > 0 || undefined);
  undefined = false;
  EXPECT_GT(width64_mismatches<Gfx12>(MatrixIsa::Gfx11Wmma, undefined), 0);
  undefined = false;
  EXPECT_GT(backward_mismatches<Gfx12>(MatrixIsa::Gfx11Wmma, undefined), 0);
}

}  // namespace
