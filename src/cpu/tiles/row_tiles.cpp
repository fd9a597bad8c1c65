#include "cpu/tiles/row_tiles.h"

#include <algorithm>
#include <cstring>

#include "cpu/elementwise.h"
#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

// Rows per tile: a 128-wide tile's input, z and y fit a 1 MiB L2; a 64-wide one's fit L1 twice.
constexpr int64_t kTileRows = 96;
// The backward's per-share weight-gradient sums: at most this many shares (each a copy of the
// parameter gradients), each a whole number of tiles.
constexpr int64_t kMaxGradientShares = 32;

uint32_t widest(const std::vector<TiledLayer>& layers) {
  uint32_t w = 0;
  for (const TiledLayer& l : layers) w = std::max({w, l.in, l.out});
  return w;
}

// A thread's tile buffers, grown to the largest asked for and kept (a tile is small).
float* tile_buffer(int which, size_t n) {
  static thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[which];
  if (b.size() < n) b.resize(n);
  return b.data();
}

void copy_rows(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows, uint32_t width) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * ldd, src + r * lds, sizeof(float) * width);
}

}  // namespace

void tiled_forward(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                   int64_t batch, const LayerRows* keep, float* out, int64_t ldo) {
  if (batch == 0 || layers.empty()) return;
  // The products need W^T (in, out): columns of C are contiguous in B's rows.
  std::vector<size_t> offset(layers.size());
  size_t total = 0;
  for (size_t l = 0; l < layers.size(); ++l) offset[l] = total, total += size_t{layers[l].in} * layers[l].out;
  std::vector<float> wt(total);
  for (size_t l = 0; l < layers.size(); ++l) {
    const TiledLayer& L = layers[l];
    for (uint32_t o = 0; o < L.out; ++o)
      for (uint32_t i = 0; i < L.in; ++i) wt[offset[l] + size_t{i} * L.out + o] = L.weights[size_t{o} * L.in + i];
  }
  const size_t tile_floats = static_cast<size_t>(kTileRows) * widest(layers);
  parallel_for(batch, kTileRows, [&](int64_t r0, int64_t r1) {
    const int64_t rows = r1 - r0;
    float* zbuf = tile_buffer(0, tile_floats);
    float* ybuf = tile_buffer(1, tile_floats);
    const float* in = x + r0 * ldx;
    int64_t ld = ldx;
    for (size_t l = 0; l < layers.size(); ++l) {
      const TiledLayer& L = layers[l];
      float* z = keep ? keep->z[l] + r0 * L.out : zbuf;
      float* y = keep ? keep->y[l] + r0 * L.out : ybuf;
      kernels.gemm(rows, L.out, L.in, in, ld, 1, wt.data() + offset[l], L.out, z, L.out, false);
      bias_activate(L.act, z, y, L.bias, 0, rows, L.out);
      in = y;
      ld = L.out;
    }
    if (out) copy_rows(in, ld, out + r0 * ldo, ldo, rows, layers.back().out);
  });
}

void tiled_backward(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                    int64_t batch, const LayerRows& kept, const float* dy, int64_t ldy, float* gradients,
                    size_t n_params, bool accumulate, float* dinput, int64_t ldi) {
  // Shares of whole tiles, fixed by the batch alone.
  const int64_t tiles = (batch + kTileRows - 1) / kTileRows;
  const int64_t share_tiles = std::max<int64_t>(1, (tiles + kMaxGradientShares - 1) / kMaxGradientShares);
  const int64_t share_rows = share_tiles * kTileRows;
  const int64_t n_shares = (batch + share_rows - 1) / share_rows;
  std::vector<float> sums(gradients ? static_cast<size_t>(n_shares) * n_params : 0);
  const size_t tile_floats = static_cast<size_t>(kTileRows) * widest(layers);

  parallel_for(batch, share_rows, [&](int64_t s0, int64_t s1) {
    float* sum = gradients ? sums.data() + static_cast<size_t>(s0 / share_rows) * n_params : nullptr;
    float* dz = tile_buffer(0, tile_floats);
    float* dnext = tile_buffer(1, tile_floats);
    for (int64_t r0 = s0; r0 < s1; r0 += kTileRows) {
      const int64_t rows = std::min(kTileRows, s1 - r0);
      const float* d = dy + r0 * ldy;  // dL/dy of the current layer's rows
      int64_t ld = ldy;
      for (size_t l = layers.size(); l-- > 0;) {
        const TiledLayer& L = layers[l];
        activation_backward(L.act, d, ld, kept.z[l] + r0 * L.out, dz, 0, rows, L.out);
        const float* in = l == 0 ? x + r0 * ldx : kept.y[l - 1] + r0 * L.in;
        const int64_t ld_in = l == 0 ? ldx : L.in;
        if (sum) {
          // dW += dz^T in (A read transposed: A(o, r) = dz[r * out + o]); the first tile of a
          // share starts the sum.
          kernels.gemm(L.out, L.in, rows, dz, 1, L.out, in, ld_in, sum + L.weight_offset, L.in, r0 != s0);
          if (L.bias) {
            float* db = sum + L.bias_offset;
            if (r0 == s0) std::fill(db, db + L.out, 0.0f);
            for (int64_t r = 0; r < rows; ++r)
              for (uint32_t o = 0; o < L.out; ++o) db[o] += dz[r * L.out + o];
          }
        }
        if (l > 0) {
          kernels.gemm(rows, L.in, L.out, dz, L.out, 1, L.weights, L.in, dnext, L.in, false);
          d = dnext;
          ld = L.in;
        } else if (dinput) {
          kernels.gemm(rows, L.in, L.out, dz, L.out, 1, L.weights, L.in, dinput + r0 * ldi, ldi, false);
        }
      }
    }
  });
  if (!gradients) return;
  // The shares' sums, added in share order.
  parallel_for(static_cast<int64_t>(n_params), 16384, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float g = accumulate ? gradients[p] : 0.0f;
      for (int64_t s = 0; s < n_shares; ++s) g += sums[static_cast<size_t>(s) * n_params + p];
      gradients[p] = g;
    }
  });
}

}  // namespace tinyfuse::cpu
