#include "cpu/tiles/row_tiles.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "cpu/elementwise.h"
#include "cpu/parallel.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cpu {

namespace {

// Rows per tile: at 64 wide a tile of one layer is 24 KiB, so a product's input and output share
// the L1; at 128 wide the training sweep's whole tile (z and y of three layers) is 288 KiB of L2.
// A multiple of the kernels' block heights (6, 8, 12, 16).
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

// Every layer's W^T (in, out), which the forward products read: C's columns contiguous in B's rows.
struct TransposedWeights {
  std::vector<float> data;
  std::vector<size_t> offset;

  explicit TransposedWeights(const std::vector<TiledLayer>& layers) : offset(layers.size()) {
    size_t total = 0;
    for (size_t l = 0; l < layers.size(); ++l) offset[l] = total, total += size_t{layers[l].in} * layers[l].out;
    data.resize(total);
    for (size_t l = 0; l < layers.size(); ++l) {
      const TiledLayer& L = layers[l];
      for (uint32_t o = 0; o < L.out; ++o)
        for (uint32_t i = 0; i < L.in; ++i) data[offset[l] + size_t{i} * L.out + o] = L.weights[size_t{o} * L.in + i];
    }
  }
  const float* operator[](size_t l) const { return data.data() + offset[l]; }
};

// One tile of `rows` rows forward: layer l's z and y go to z(l) and y(l) (leading dimension out).
template <typename Z, typename Y>
void forward_tile(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const TransposedWeights& wt,
                  const float* x, int64_t ldx, int64_t rows, Z&& z, Y&& y) {
  const float* in = x;
  int64_t ld = ldx;
  for (size_t l = 0; l < layers.size(); ++l) {
    const TiledLayer& L = layers[l];
    kernels.gemm(rows, L.out, L.in, in, ld, 1, wt[l], L.out, z(l), L.out, false);
    bias_activate(L.act, z(l), y(l), L.bias, 0, rows, L.out);
    in = y(l);
    ld = L.out;
  }
}

// One tile backward from dL/dy of the top layer (dy, leading dimension ldy), over the forward's
// z(l) and y(l): the weight and bias gradients added to `sum` (started afresh when `start`;
// skipped when null), dL/dinput to `dinput` when not null. dz and dnext: tile buffers.
template <typename Z, typename Y>
void backward_tile(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                   int64_t rows, Z&& z, Y&& y, const float* dy, int64_t ldy, float* sum, bool start, float* dz,
                   float* dnext, float* dinput, int64_t ldi) {
  const float* d = dy;
  int64_t ld = ldy;
  for (size_t l = layers.size(); l-- > 0;) {
    const TiledLayer& L = layers[l];
    activation_backward(L.act, d, ld, z(l), dz, 0, rows, L.out);
    if (sum) {
      const float* in = l == 0 ? x : y(l - 1);
      // dW += dz^T in, A read transposed: A(o, r) = dz[r * out + o].
      kernels.gemm(L.out, L.in, rows, dz, 1, L.out, in, l == 0 ? ldx : L.in, sum + L.weight_offset, L.in, !start);
      if (L.bias) {
        float* db = sum + L.bias_offset;
        if (start) std::fill(db, db + L.out, 0.0f);
        for (int64_t r = 0; r < rows; ++r)
          for (uint32_t o = 0; o < L.out; ++o) db[o] += dz[r * L.out + o];
      }
    }
    if (l > 0) {
      kernels.gemm(rows, L.in, L.out, dz, L.out, 1, L.weights, L.in, dnext, L.in, false);
      d = dnext;
      ld = L.in;
    } else if (dinput) {
      kernels.gemm(rows, L.in, L.out, dz, L.out, 1, L.weights, L.in, dinput, ldi, false);
    }
  }
}

// Shares of whole tiles for the backward's gradient sums, fixed by the batch alone. A share's
// first tile writes every entry of its sums (the layers own all of them), so they start
// uninitialised.
struct Shares {
  int64_t rows, count;
  explicit Shares(int64_t batch) {
    const int64_t tiles = (batch + kTileRows - 1) / kTileRows;
    rows = std::max<int64_t>(1, (tiles + kMaxGradientShares - 1) / kMaxGradientShares) * kTileRows;
    count = (batch + rows - 1) / rows;
  }
};

// The shares' sums rely on the layers owning every gradient entry.
void check_layers_own_all(const std::vector<TiledLayer>& layers, size_t n_params) {
  size_t owned = 0;
  for (const TiledLayer& l : layers) owned += size_t{l.in} * l.out + (l.bias ? l.out : 0);
  if (owned != n_params)
    throw Error("row-tile engine: the layers own " + std::to_string(owned) + " of " + std::to_string(n_params) +
                " parameter gradients (an MLP layout it was not written for)");
}

// gradients = (accumulate ? gradients : 0) + the shares' sums, added in share order.
void add_shares(const float* sums, int64_t n_shares, float* gradients, size_t n_params, bool accumulate) {
  parallel_for(static_cast<int64_t>(n_params), 16384, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float g = accumulate ? gradients[p] : 0.0f;
      for (int64_t s = 0; s < n_shares; ++s) g += sums[static_cast<size_t>(s) * n_params + p];
      gradients[p] = g;
    }
  });
}

}  // namespace

void tiled_forward(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                   int64_t batch, const LayerRows* keep, float* out, int64_t ldo) {
  if (batch == 0 || layers.empty()) return;
  const TransposedWeights wt(layers);
  const size_t tile_floats = static_cast<size_t>(kTileRows) * widest(layers);
  parallel_for(batch, kTileRows, [&](int64_t r0, int64_t r1) {
    const int64_t rows = r1 - r0;
    if (keep) {
      forward_tile(kernels, layers, wt, x + r0 * ldx, ldx, rows, [&](size_t l) { return keep->z[l] + r0 * layers[l].out; },
                   [&](size_t l) { return keep->y[l] + r0 * layers[l].out; });
    } else {
      // Inference keeps nothing: two tile buffers in turn (a layer's product reads y of the
      // layer below before its activation overwrites it), the top layer's y straight into `out`
      // when its rows are dense.
      float* zbuf = tile_buffer(0, tile_floats);
      float* ybuf = tile_buffer(1, tile_floats);
      const size_t top = layers.size() - 1;
      float* y_top = out && ldo == layers[top].out ? out + r0 * ldo : ybuf;
      forward_tile(kernels, layers, wt, x + r0 * ldx, ldx, rows, [&](size_t) { return zbuf; },
                   [&](size_t l) { return l == top ? y_top : ybuf; });
      if (out && y_top == ybuf) copy_rows(ybuf, layers[top].out, out + r0 * ldo, ldo, rows, layers[top].out);
      return;
    }
    if (out) copy_rows(keep->y.back() + r0 * layers.back().out, layers.back().out, out + r0 * ldo, ldo, rows,
                       layers.back().out);
  });
}

void tiled_backward(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                    int64_t batch, const LayerRows& kept, const float* dy, int64_t ldy, float* gradients,
                    size_t n_params, bool accumulate, float* dinput, int64_t ldi) {
  if (gradients) check_layers_own_all(layers, n_params);
  const Shares shares(batch);
  std::unique_ptr<float[]> sums(gradients ? new float[static_cast<size_t>(shares.count) * n_params] : nullptr);
  const size_t tile_floats = static_cast<size_t>(kTileRows) * widest(layers);
  parallel_for(batch, shares.rows, [&](int64_t s0, int64_t s1) {
    float* sum = gradients ? sums.get() + static_cast<size_t>(s0 / shares.rows) * n_params : nullptr;
    float* dz = tile_buffer(0, tile_floats);
    float* dnext = tile_buffer(1, tile_floats);
    for (int64_t r0 = s0; r0 < s1; r0 += kTileRows) {
      const int64_t rows = std::min(kTileRows, s1 - r0);
      backward_tile(kernels, layers, x + r0 * ldx, ldx, rows, [&](size_t l) { return kept.z[l] + r0 * layers[l].out; },
                    [&](size_t l) { return kept.y[l] + r0 * layers[l].out; }, dy + r0 * ldy, ldy, sum, r0 == s0, dz,
                    dnext, dinput ? dinput + r0 * ldi : nullptr, ldi);
    }
  });
  if (gradients) add_shares(sums.get(), shares.count, gradients, n_params, accumulate);
}

void tiled_training_pass(const TileGemm& kernels, const std::vector<TiledLayer>& layers, const float* x, int64_t ldx,
                         int64_t batch, const TileLoss& loss, float* gradients, size_t n_params, bool accumulate) {
  check_layers_own_all(layers, n_params);
  const Shares shares(batch);
  std::unique_ptr<float[]> sums(new float[static_cast<size_t>(shares.count) * n_params]);
  const TransposedWeights wt(layers);
  // Per tile: z and y of every layer, then the top layer's dL/dy, dz and the next dL/dy.
  std::vector<size_t> offset(layers.size());
  size_t per_row = 0;
  for (size_t l = 0; l < layers.size(); ++l) offset[l] = per_row, per_row += 2 * size_t{layers[l].out};
  const uint32_t top = layers.back().out;
  const size_t tile_floats = static_cast<size_t>(kTileRows) * widest(layers);
  parallel_for(batch, shares.rows, [&](int64_t s0, int64_t s1) {
    float* sum = sums.get() + static_cast<size_t>(s0 / shares.rows) * n_params;
    float* acts = tile_buffer(0, static_cast<size_t>(kTileRows) * per_row);
    float* dtop = tile_buffer(1, static_cast<size_t>(kTileRows) * top);
    float* dz = tile_buffer(2, 2 * tile_floats);
    float* dnext = dz + tile_floats;
    auto z = [&](size_t l) { return acts + kTileRows * offset[l]; };
    auto y = [&](size_t l) { return acts + kTileRows * (offset[l] + layers[l].out); };
    for (int64_t r0 = s0; r0 < s1; r0 += kTileRows) {
      const int64_t rows = std::min(kTileRows, s1 - r0);
      forward_tile(kernels, layers, wt, x + r0 * ldx, ldx, rows, z, y);
      loss(r0, rows, y(layers.size() - 1), dtop);
      backward_tile(kernels, layers, x + r0 * ldx, ldx, rows, z, y, dtop, top, sum, r0 == s0, dz, dnext, nullptr, 0);
    }
  });
  add_shares(sums.get(), shares.count, gradients, n_params, accumulate);
}

}  // namespace tinyfuse::cpu
