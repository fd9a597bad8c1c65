// The tile product written once over a vector type V (tile_gemm_avx512.cpp, tile_gemm_avx2.cpp
// include it inside namespace tinyfuse::cpu, with their V and TINYFUSE_TILE_TARGET defined). Every
// function here has internal linkage, so the two instruction sets' copies never meet at link time.

namespace {

// A block of MR rows by NV vectors of C, accumulated over k in registers. MASKED: the last vector
// holds only `tail` valid columns (1..V::kLanes-1).
template <int MR, int NV, bool MASKED>
TINYFUSE_TILE_TARGET void tile_block(int64_t k, const float* a, int64_t a_row, int64_t a_inner, const float* b,
                                     int64_t ldb, float* c, int64_t ldc, int tail, bool accumulate) {
  using R = typename V::Reg;
  constexpr int L = V::kLanes;
  R acc[MR][NV];
  const auto mask = V::mask(MASKED ? tail : L);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) {
      const bool part = MASKED && j == NV - 1;
      acc[i][j] = !accumulate ? V::zero() : part ? V::load_part(c + i * ldc + j * L, mask) : V::load(c + i * ldc + j * L);
    }
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    R bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = MASKED && j == NV - 1 ? V::load_part(bp + j * L, mask) : V::load(bp + j * L);
    const float* ap = a + p * a_inner;
    for (int i = 0; i < MR; ++i) {
      const R av = V::broadcast(ap + i * a_row);
      for (int j = 0; j < NV; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) {
      if (MASKED && j == NV - 1)
        V::store_part(c + i * ldc + j * L, acc[i][j], mask);
      else
        V::store(c + i * ldc + j * L, acc[i][j]);
    }
}

// Rows [0, m) of a panel of NV vectors: blocks of the most rows that fit the registers, then one
// block for the rows left.
template <int NV, bool MASKED, int MR = V::rows_for(NV)>
TINYFUSE_TILE_TARGET void tile_panel(int64_t m, int64_t k, const float* a, int64_t a_row, int64_t a_inner,
                                     const float* b, int64_t ldb, float* c, int64_t ldc, int tail, bool accumulate) {
  int64_t i = 0;
  for (; i + MR <= m; i += MR)
    tile_block<MR, NV, MASKED>(k, a + i * a_row, a_row, a_inner, b, ldb, c + i * ldc, ldc, tail, accumulate);
  if constexpr (MR > 1) {
    if (i < m) tile_panel<NV, MASKED, MR - 1>(m - i, k, a + i * a_row, a_row, a_inner, b, ldb, c + i * ldc, ldc, tail,
                                               accumulate);
  }
}

template <int NV>
TINYFUSE_TILE_TARGET void tile_panel_any(int64_t m, int64_t k, const float* a, int64_t a_row, int64_t a_inner,
                                         const float* b, int64_t ldb, float* c, int64_t ldc, int tail, bool accumulate) {
  if (tail == 0)
    tile_panel<NV, false>(m, k, a, a_row, a_inner, b, ldb, c, ldc, tail, accumulate);
  else
    tile_panel<NV, true>(m, k, a, a_row, a_inner, b, ldb, c, ldc, tail, accumulate);
}

TINYFUSE_TILE_TARGET void tile_gemm_impl(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row,
                                         int64_t a_inner, const float* b, int64_t ldb, float* c, int64_t ldc,
                                         bool accumulate) {
  constexpr int L = V::kLanes;
  constexpr int64_t panel = int64_t{V::kMaxVectors} * L;
  // Columns in panels of kMaxVectors vectors; the last panel as few vectors as its columns need.
  for (int64_t j0 = 0; j0 < n; j0 += panel) {
    const int64_t cols = n - j0 < panel ? n - j0 : panel;
    const int nv = static_cast<int>((cols + L - 1) / L);
    const int tail = static_cast<int>(cols % L);
    const float* bj = b + j0;
    float* cj = c + j0;
    switch (nv) {
      case 1: tile_panel_any<1>(m, k, a, a_row, a_inner, bj, ldb, cj, ldc, tail, accumulate); break;
      case 2: tile_panel_any<2>(m, k, a, a_row, a_inner, bj, ldb, cj, ldc, tail, accumulate); break;
      case 3: if constexpr (V::kMaxVectors >= 3) tile_panel_any<3>(m, k, a, a_row, a_inner, bj, ldb, cj, ldc, tail, accumulate); break;
      case 4: if constexpr (V::kMaxVectors >= 4) tile_panel_any<4>(m, k, a, a_row, a_inner, bj, ldb, cj, ldc, tail, accumulate); break;
      default: break;
    }
  }
}

}  // namespace
