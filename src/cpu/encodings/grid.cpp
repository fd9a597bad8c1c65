#include "cpu/encodings/grid.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

constexpr uint32_t kMaxFeatures = 8;
constexpr int64_t kLookupsPerChunk = 1 << 15;  // corner lookups per parallel chunk of rows

// Where one input row falls in one level: the vertex below it along each axis, the
// interpolation weight towards the vertex above (after smoothstep), and that weight's derivative
// with respect to the fractional position.
template <typename T, uint32_t D>
struct Cell {
  uint32_t vertex[D];
  T w[D];
  T dw[D];
  T d2w[D];  // filled by locate_second_order only
};

struct GridContext : Context {
  int64_t batch = 0;
};

template <typename T, uint32_t D>
class GridEncoding final : public Encoding {
 public:
  explicit GridEncoding(GridSpec spec) : spec_(std::move(spec)), n_output_(spec_.n_output_dims()), padded_(n_output_) {}

  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return dtype_of<T>::value; }
  DType input_dtype() const override { return dtype_of<T>::value; }
  DType output_dtype() const override { return dtype_of<T>::value; }
  uint32_t input_width() const override { return D; }
  uint32_t padded_output_width() const override { return padded_; }
  uint32_t output_width() const override { return n_output_; }
  size_t n_params() const override { return spec_.n_params(); }
  json hyperparams() const override { return grid_hyperparams(spec_); }
  std::string name() const override { return "Grid"; }

  // As tiny-cuda-nn: pad to a multiple of lcm(alignment, n_features_per_level); padding is 0.
  void set_alignment(uint32_t alignment) override {
    padded_ = next_multiple(n_output_, std::lcm(std::max(alignment, 1u), spec_.n_features_per_level));
  }

  std::vector<ParamSegment> param_segments() const override { return grid_param_segments(spec_); }

  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    auto check = [&](const TensorView& t, const char* what, bool optional) -> T* {
      if (optional && t.data == nullptr) return nullptr;
      if (t.device != Device::CPU || t.dtype != param_dtype() || static_cast<size_t>(t.numel()) != n_params() ||
          !t.contiguous())
        throw ShapeError(std::string(what) + ": expected " + std::to_string(n_params()) + " contiguous " +
                         to_string(param_dtype()) + " values on cpu, got " + t.describe());
      return static_cast<T*>(t.data);
    };
    params_ = check(params, "params", false);
    inference_params_ = check(inference_params, "inference_params", false);
    gradients_ = check(gradients, "gradients", true);
  }

  void initialize_params(Pcg32& rng, float* params_host, float scale) override {
    grid_initialize_params(spec_, rng, params_host, scale);
  }

  void inference(const TensorView& input, const TensorView& output) override {
    check_io(input, &output);
    encode(input, output, inference_params_);
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool /*prepare_input_gradients: backward recomputes what it needs*/) override {
    check_io(input, output);
    auto ctx = std::make_unique<GridContext>();
    ctx->batch = input.rows();
    if (output) encode(input, *output, use_inference_params ? inference_params_ : params_);
    return ctx;
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& /*output*/,
                const TensorView& dL_doutput, const TensorView* dL_dinput, bool use_inference_params,
                GradientMode mode) override {
    const auto* ctx = dynamic_cast<const GridContext*>(&base_ctx);
    if (!ctx) throw Error(name() + "::backward: context does not come from this encoding's forward()");
    check_io(input, nullptr);
    const int64_t batch = input.rows();
    if (ctx->batch != batch)
      throw ShapeError(name() + "::backward: input batch " + std::to_string(batch) +
                       " differs from the forward() that made the context (" + std::to_string(ctx->batch) + ")");
    check_matrix(dL_doutput, "dL_doutput", batch, padded_, dtype_of<T>::value, Device::CPU);
    check_rows_dense(dL_doutput, "dL_doutput");
    if (dL_dinput) {
      check_matrix(*dL_dinput, "dL_dinput", batch, D, dtype_of<T>::value, Device::CPU);
      check_rows_dense(*dL_dinput, "dL_dinput");
    }
    if (mode != GradientMode::Ignore && !gradients_)
      throw Error(name() + "::backward: parameter gradients requested but set_params() got no gradient buffer");

    if (mode != GradientMode::Ignore) param_gradients(input, dL_doutput, mode == GradientMode::Accumulate);
    if (dL_dinput) input_gradients(input, dL_doutput, *dL_dinput, use_inference_params ? inference_params_ : params_);
  }

  void backward_backward_input(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    const auto* ctx = dynamic_cast<const GridContext*>(&base_ctx);
    if (!ctx) throw Error(name() + "::backward_backward_input: context does not come from this encoding's forward()");
    check_io(input, nullptr);
    const int64_t batch = input.rows();
    if (ctx->batch != batch)
      throw ShapeError(name() + "::backward_backward_input: input batch " + std::to_string(batch) +
                       " differs from the forward() that made the context (" + std::to_string(ctx->batch) + ")");
    check_matrix(dL_ddLdinput, "dL_ddLdinput", batch, D, dtype_of<T>::value, Device::CPU);
    check_rows_dense(dL_ddLdinput, "dL_ddLdinput");
    check_matrix(dL_doutput, "dL_doutput", batch, padded_, dtype_of<T>::value, Device::CPU);
    check_rows_dense(dL_doutput, "dL_doutput");
    if (dL_ddLdoutput) {
      check_matrix(*dL_ddLdoutput, "dL_ddLdoutput", batch, padded_, dtype_of<T>::value, Device::CPU);
      check_rows_dense(*dL_ddLdoutput, "dL_ddLdoutput");
    }
    if (dL_dinput) {
      check_matrix(*dL_dinput, "dL_dinput", batch, D, dtype_of<T>::value, Device::CPU);
      check_rows_dense(*dL_dinput, "dL_dinput");
    }
    if (mode != GradientMode::Ignore && !gradients_)
      throw Error(name() + "::backward_backward_input: parameter gradients requested but set_params() got no gradient "
                           "buffer");
    if (mode != GradientMode::Ignore)
      second_order_param_gradients(input, dL_ddLdinput, dL_doutput, mode == GradientMode::Accumulate);
    const T* grid = use_inference_params ? inference_params_ : params_;
    if (dL_ddLdoutput) second_order_output_gradients(input, dL_ddLdinput, *dL_ddLdoutput, grid);
    if (dL_dinput) second_order_input_gradients(input, dL_ddLdinput, dL_doutput, *dL_dinput, grid);
  }

 private:
  void check_io(const TensorView& input, const TensorView* output) const {
    if (!params_) throw Error(name() + ": no parameters set; call set_params() (or use a Trainer) first");
    check_matrix(input, "input", -1, D, dtype_of<T>::value, Device::CPU);
    check_rows_dense(input, "input");
    if (output) {
      check_matrix(*output, "output", input.rows(), padded_, dtype_of<T>::value, Device::CPU);
      check_rows_dense(*output, "output");
    }
  }

  int64_t rows_per_chunk(uint32_t lookups_per_level) const {
    return std::max<int64_t>(16, kLookupsPerChunk / std::max<int64_t>(1, int64_t(spec_.n_levels) * lookups_per_level));
  }

  void locate(const T* x, uint32_t level, Cell<T, D>& c) const {
    const T scale = T(spec_.level_scale[level]);
    for (uint32_t d = 0; d < D; ++d) grid_locate_axis(scale, x[d], spec_.interpolation, c.vertex[d], c.w[d], c.dw[d]);
  }

  void locate_second_order(const T* x, uint32_t level, Cell<T, D>& c) const {
    const T scale = T(spec_.level_scale[level]);
    for (uint32_t d = 0; d < D; ++d)
      grid_locate_axis(scale, x[d], spec_.interpolation, c.vertex[d], c.w[d], c.dw[d], c.d2w[d]);
  }

  // Index of the first parameter of vertex `v`'s entry in `level`.
  size_t param_index(uint32_t level, const uint32_t* v) const {
    // A power-of-two table (every Hash level) is reduced with a mask, not a division: the same
    // entry, at a fraction of the cost per corner.
    const uint32_t size = spec_.level_table_size(level);
    const uint32_t raw = grid_entry_unreduced(spec_.type, spec_.hash, size, spec_.level_resolution[level], v, D);
    const uint32_t entry = (size & (size - 1)) == 0 ? raw & (size - 1) : raw % size;
    return (static_cast<size_t>(spec_.level_offset[level]) + entry) * spec_.n_features_per_level;
  }

  // Corner `corner` of the cell (bit d: lower or upper vertex along axis d) and its weight.
  T corner(const Cell<T, D>& c, uint32_t corner, uint32_t* v) const {
    for (uint32_t d = 0; d < D; ++d) v[d] = c.vertex[d] + ((corner >> d) & 1u);
    return grid_corner_weight<T, D>(c.w, corner);
  }

  void encode(const TensorView& input, const TensorView& output, const T* grid) const {
    const uint32_t F = spec_.n_features_per_level;
    const T* x = input.ptr<T>();
    T* y = output.ptr<T>();
    const int64_t ldx = input.strides[0], ldy = output.strides[0];
    const bool nearest = spec_.interpolation == GridInterpolation::Nearest;
    parallel_for(input.rows(), rows_per_chunk(nearest ? 1 : 1u << D), [&](int64_t b0, int64_t b1) {
      Cell<T, D> c;
      CornerBlock block;
      for (uint32_t l = 0; l < spec_.n_levels; ++l) {
        if (nearest) {
          for (int64_t b = b0; b < b1; ++b) {
            locate(x + b * ldx, l, c);
            const T* p = grid + param_index(l, c.vertex);
            for (uint32_t f = 0; f < F; ++f) y[b * ldy + l * F + f] = p[f];
          }
          continue;
        }
        for (int64_t blk = b0; blk < b1; blk += CornerBlock::kRows) {
          const int64_t n = std::min<int64_t>(CornerBlock::kRows, b1 - blk);
          locate_block(l, x + blk * ldx, ldx, n, grid, false, block);
          for (int64_t i = 0; i < n; ++i) {
            T acc[kMaxFeatures] = {};
            for (uint32_t k = 0; k < CornerBlock::kCorners; ++k) {
              const T* p = grid + block.index[i][k];
              for (uint32_t f = 0; f < F; ++f) acc[f] += block.weight[i][k] * p[f];
            }
            for (uint32_t f = 0; f < F; ++f) y[(blk + i) * ldy + l * F + f] = acc[f];
          }
        }
      }
      for (int64_t b = b0; b < b1; ++b)
        for (uint32_t j = n_output_; j < padded_; ++j) y[b * ldy + j] = T(0);
    });
  }

  // Each level owns a disjoint run of parameters, so levels run in parallel and each level adds
  // its records' contributions serially in batch order: the sums do not depend on the thread
  // count or on scheduling, bit for bit.
  void param_gradients(const TensorView& input, const TensorView& dL_doutput, bool accumulate) const {
    const uint32_t F = spec_.n_features_per_level;
    const T* x = input.ptr<T>();
    const T* dy = dL_doutput.ptr<T>();
    const int64_t ldx = input.strides[0], ldg = dL_doutput.strides[0];
    const int64_t batch = input.rows();
    T* grads = gradients_;
    parallel_for(spec_.n_levels, 1, [&](int64_t l0, int64_t l1) {
      Cell<T, D> c;
      uint32_t v[D];
      for (int64_t li = l0; li < l1; ++li) {
        const uint32_t l = static_cast<uint32_t>(li);
        if (!accumulate)
          std::fill(grads + size_t(spec_.level_offset[l]) * F, grads + size_t(spec_.level_offset[l + 1]) * F, T(0));
        if (spec_.interpolation != GridInterpolation::Nearest && !spec_.stochastic_interpolation) {
          scatter_level(l, x, ldx, dy, ldg, batch, grads);
          continue;
        }
        for (int64_t b = 0; b < batch; ++b) {
          const T* g = dy + b * ldg + l * F;
          locate(x + b * ldx, l, c);
          if (spec_.interpolation == GridInterpolation::Nearest) {
            T* dst = grads + param_index(l, c.vertex);
            for (uint32_t f = 0; f < F; ++f) dst[f] += g[f];
            continue;
          }
          if (spec_.stochastic_interpolation) {
            // One sample per record and level picks a single corner, all of the gradient going there.
            const T sample = T(grid_stochastic_sample(static_cast<uint32_t>(b), l, static_cast<uint32_t>(batch)));
            for (uint32_t d = 0; d < D; ++d) v[d] = sample >= c.w[d] ? c.vertex[d] : c.vertex[d] + 1;
            T* dst = grads + param_index(l, v);
            for (uint32_t f = 0; f < F; ++f) dst[f] += g[f];
            continue;
          }
          for (uint32_t k = 0; k < (1u << D); ++k) {
            const T w = corner(c, k, v);
            T* dst = grads + param_index(l, v);
            for (uint32_t f = 0; f < F; ++f) dst[f] += w * g[f];
          }
        }
      }
    });
  }

  // The corners of a block of rows in one level: their entries' first parameters and weights.
  // Lookups are random accesses to a table larger than the caches: the block's entries are
  // located and prefetched before any is touched, so that their misses overlap.
  struct CornerBlock {
    static constexpr int64_t kRows = 16;
    static constexpr uint32_t kCorners = 1u << D;
    size_t index[kRows][kCorners];
    T weight[kRows][kCorners];
  };

  // Rows [0, n) of x (n <= kRows) in level l; `table` is what the entries will be read from or,
  // when `for_write`, added to.
  void locate_block(uint32_t l, const T* x, int64_t ldx, int64_t n, const T* table, bool for_write,
                    CornerBlock& block) const {
    Cell<T, D> c;
    uint32_t v[D];
    for (int64_t i = 0; i < n; ++i) {
      locate(x + i * ldx, l, c);
      for (uint32_t k = 0; k < CornerBlock::kCorners; ++k) {
        block.weight[i][k] = corner(c, k, v);
        block.index[i][k] = param_index(l, v);
        if (for_write)
          __builtin_prefetch(table + block.index[i][k], 1);
        else
          __builtin_prefetch(table + block.index[i][k]);
      }
    }
  }

  // Level l's interpolated gradients, rows in batch order and corners in order as the forward
  // reads them (a block at a time, locate_block; the same updates in the same order: the same
  // bits).
  void scatter_level(uint32_t l, const T* x, int64_t ldx, const T* dy, int64_t ldg, int64_t batch, T* grads) const {
    const uint32_t F = spec_.n_features_per_level;
    CornerBlock block;
    for (int64_t blk = 0; blk < batch; blk += CornerBlock::kRows) {
      const int64_t n = std::min<int64_t>(CornerBlock::kRows, batch - blk);
      locate_block(l, x + blk * ldx, ldx, n, grads, true, block);
      for (int64_t i = 0; i < n; ++i) {
        const T* g = dy + (blk + i) * ldg + l * F;
        for (uint32_t k = 0; k < CornerBlock::kCorners; ++k) {
          T* dst = grads + block.index[i][k];
          for (uint32_t f = 0; f < F; ++f) dst[f] += block.weight[i][k] * g[f];
        }
      }
    }
  }

  // dL/dx[d] = sum over levels and features of dL/dy * dy/dx[d], where dy/dx[d] is the
  // difference of the values on the two faces of the cell across axis d, interpolated over the
  // other axes, times scale (d pos / dx) and the interpolation kernel's derivative. Nearest
  // lookups are piecewise constant: their input gradient is 0.
  void input_gradients(const TensorView& input, const TensorView& dL_doutput, const TensorView& dL_dinput,
                       const T* grid) const {
    const uint32_t F = spec_.n_features_per_level;
    const T* x = input.ptr<T>();
    const T* dy = dL_doutput.ptr<T>();
    T* dx = dL_dinput.ptr<T>();
    const int64_t ldx = input.strides[0], ldg = dL_doutput.strides[0], ldi = dL_dinput.strides[0];
    const bool nearest = spec_.interpolation == GridInterpolation::Nearest;
    parallel_for(input.rows(), rows_per_chunk(D << D), [&](int64_t b0, int64_t b1) {
      Cell<T, D> c;
      uint32_t v[D];
      for (int64_t b = b0; b < b1; ++b) {
        T acc[D] = {};
        for (uint32_t l = 0; l < spec_.n_levels && !nearest; ++l) {
          const T* g = dy + b * ldg + l * F;
          const T scale = T(spec_.level_scale[l]);
          locate(x + b * ldx, l, c);
          // The cell's 2^D corner entries, looked up once for all axes.
          const T* corner_params[1u << D];
          for (uint32_t k = 0; k < (1u << D); ++k) {
            for (uint32_t d = 0; d < D; ++d) v[d] = c.vertex[d] + ((k >> d) & 1u);
            corner_params[k] = grid + param_index(l, v);
          }
          for (uint32_t gd = 0; gd < D; ++gd) {
            T sum = T(0);
            for (uint32_t k = 0; k < (1u << D); ++k) {
              if ((k >> gd) & 1u) continue;  // k: lower face across axis gd; k | bit gd: upper face
              T w = scale;
              for (uint32_t d = 0; d < D; ++d)
                if (d != gd) w *= ((k >> d) & 1u) ? c.w[d] : T(1) - c.w[d];
              const T* lo = corner_params[k];
              const T* hi = corner_params[k | (1u << gd)];
              T dot = T(0);
              for (uint32_t f = 0; f < F; ++f) dot += (hi[f] - lo[f]) * g[f];
              sum += w * dot;
            }
            acc[gd] += sum * c.dw[gd];
          }
        }
        for (uint32_t d = 0; d < D; ++d) dx[b * ldi + d] = acc[d];
      }
    });
  }

  // Second derivatives. dL/dx = sum over corners of a directional weight times the corner's
  // features dotted with dL/dy (grid_corner_directional_weight), so given v = dL2/d(dL/dx) each
  // corner entry gets weight * dL/dy and dL/dy gets sum of weight * features. Nearest lookups
  // have no input gradient, so nothing flows back through it.
  void second_order_param_gradients(const TensorView& input, const TensorView& dL_ddLdinput,
                                    const TensorView& dL_doutput, bool accumulate) const {
    const uint32_t F = spec_.n_features_per_level;
    const T* x = input.ptr<T>();
    const T* v = dL_ddLdinput.ptr<T>();
    const T* dy = dL_doutput.ptr<T>();
    const int64_t ldx = input.strides[0], ldv = dL_ddLdinput.strides[0], ldg = dL_doutput.strides[0];
    const int64_t batch = input.rows();
    const bool nearest = spec_.interpolation == GridInterpolation::Nearest;
    T* grads = gradients_;
    parallel_for(spec_.n_levels, 1, [&](int64_t l0, int64_t l1) {  // levels own disjoint parameters
      Cell<T, D> c;
      uint32_t vtx[D];
      for (int64_t li = l0; li < l1; ++li) {
        const uint32_t l = static_cast<uint32_t>(li);
        const T scale = T(spec_.level_scale[l]);
        if (!accumulate)
          std::fill(grads + size_t(spec_.level_offset[l]) * F, grads + size_t(spec_.level_offset[l + 1]) * F, T(0));
        for (int64_t b = 0; b < batch && !nearest; ++b) {
          const T* g = dy + b * ldg + l * F;
          locate(x + b * ldx, l, c);
          for (uint32_t k = 0; k < (1u << D); ++k) {
            const T w = grid_corner_directional_weight<T, D>(c.w, c.dw, scale, v + b * ldv, k);
            corner(c, k, vtx);
            T* dst = grads + param_index(l, vtx);
            for (uint32_t f = 0; f < F; ++f) dst[f] += w * g[f];
          }
        }
      }
    });
  }

  void second_order_output_gradients(const TensorView& input, const TensorView& dL_ddLdinput,
                                     const TensorView& dL_ddLdoutput, const T* grid) const {
    const uint32_t F = spec_.n_features_per_level;
    const T* x = input.ptr<T>();
    const T* v = dL_ddLdinput.ptr<T>();
    T* out = dL_ddLdoutput.ptr<T>();
    const int64_t ldx = input.strides[0], ldv = dL_ddLdinput.strides[0], ldo = dL_ddLdoutput.strides[0];
    const bool nearest = spec_.interpolation == GridInterpolation::Nearest;
    parallel_for(input.rows(), rows_per_chunk(1u << D), [&](int64_t b0, int64_t b1) {
      Cell<T, D> c;
      uint32_t vtx[D];
      for (int64_t b = b0; b < b1; ++b) {
        T* row = out + b * ldo;
        std::fill(row, row + padded_, T(0));
        for (uint32_t l = 0; l < spec_.n_levels && !nearest; ++l) {
          const T scale = T(spec_.level_scale[l]);
          locate(x + b * ldx, l, c);
          for (uint32_t k = 0; k < (1u << D); ++k) {
            const T w = grid_corner_directional_weight<T, D>(c.w, c.dw, scale, v + b * ldv, k);
            corner(c, k, vtx);
            const T* p = grid + param_index(l, vtx);
            for (uint32_t f = 0; f < F; ++f) row[l * F + f] += w * p[f];
          }
        }
      }
    });
  }

  // dL2/dx through the interpolation's Hessian: each corner's features dotted with dL/dy, weighted
  // by grid_corner_hessian_weight, summed over corners and levels (in order: no atomics, so
  // repeatable). Nearest lookups are piecewise constant: 0.
  void second_order_input_gradients(const TensorView& input, const TensorView& dL_ddLdinput,
                                    const TensorView& dL_doutput, const TensorView& dL_dinput, const T* grid) const {
    const uint32_t F = spec_.n_features_per_level;
    const T* x = input.ptr<T>();
    const T* v = dL_ddLdinput.ptr<T>();
    const T* dy = dL_doutput.ptr<T>();
    T* dx = dL_dinput.ptr<T>();
    const int64_t ldx = input.strides[0], ldv = dL_ddLdinput.strides[0], ldg = dL_doutput.strides[0],
                  ldi = dL_dinput.strides[0];
    const bool nearest = spec_.interpolation == GridInterpolation::Nearest;
    parallel_for(input.rows(), rows_per_chunk(D << D), [&](int64_t b0, int64_t b1) {
      Cell<T, D> c;
      uint32_t vtx[D];
      for (int64_t b = b0; b < b1; ++b) {
        T acc[D] = {};
        for (uint32_t l = 0; l < spec_.n_levels && !nearest; ++l) {
          const T scale = T(spec_.level_scale[l]);
          const T* g = dy + b * ldg + l * F;
          locate_second_order(x + b * ldx, l, c);
          for (uint32_t k = 0; k < (1u << D); ++k) {
            corner(c, k, vtx);
            const T* p = grid + param_index(l, vtx);
            T dot = T(0);
            for (uint32_t f = 0; f < F; ++f) dot += p[f] * g[f];
            for (uint32_t e = 0; e < D; ++e)
              acc[e] += grid_corner_hessian_weight<T, D>(c.w, c.dw, c.d2w, scale, v + b * ldv, k, e) * dot;
          }
        }
        for (uint32_t e = 0; e < D; ++e) dx[b * ldi + e] = acc[e];
      }
    });
  }

  GridSpec spec_;
  uint32_t n_output_, padded_;
  T* params_ = nullptr;
  T* inference_params_ = nullptr;
  T* gradients_ = nullptr;
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_grid_encoding(const GridSpec& spec) {
  switch (spec.n_dims) {
    case 1: return std::make_unique<GridEncoding<T, 1>>(spec);
    case 2: return std::make_unique<GridEncoding<T, 2>>(spec);
    case 3: return std::make_unique<GridEncoding<T, 3>>(spec);
    case 4: return std::make_unique<GridEncoding<T, 4>>(spec);
    default:
      throw ConfigError("encoding.n_input_dims", std::to_string(spec.n_dims), "grid encodings encode 1 to 4 input dimensions",
                        "1, 2, 3, 4");
  }
}

template std::unique_ptr<Encoding> make_grid_encoding<float>(const GridSpec&);
template std::unique_ptr<Encoding> make_grid_encoding<double>(const GridSpec&);

}  // namespace tinyfuse::cpu
