#include "cpu/encodings/composite.h"

#include <algorithm>
#include <new>
#include <numeric>

#include "core/encodings/composite_config.h"
#include "core/host_memory.h"
#include "cpu/encodings/cpu_encoding.h"
#include "cpu/encodings/make_encoding.h"

namespace tinyfuse::cpu {

namespace {

// Layout, as in tiny-cuda-nn:
//  * Concatenation: part i's features start where part i-1's padded features end; part i is
//    padded (by the part itself) so that part i+1 starts at a multiple of its required output
//    alignment, and the composite's own padding goes to the last part (so a SphericalHarmonics
//    last part gets it in front of its features, like everywhere in tiny-cuda-nn).
//  * Sum / Product: every part is padded to the same width and the composite's output column j
//    is the sum / product of the parts' column j, padding included (so a padding column of a
//    Sum holds the number of parts).
// Parts that are not CpuEncodings (Identity, Grid) only have set_alignment(); a part is padded to
// exactly w columns with set_alignment(w), which gives w whenever w is a multiple of the part's
// own alignment, so the part writes its own padding values as tiny-cuda-nn's would. Otherwise
// (a width tiny-cuda-nn could give a grid but our Grid cannot take) the composite writes the
// missing columns itself, as ones after the part's output.
// Dims read by several parts get the sum of their input gradients; dims read by none get 0.
template <typename T>
class CompositeEncoding final : public CpuEncoding {
 public:
  CompositeEncoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims)
      : n_in_(n_dims), reduction_(spec.reduction) {
    for (const auto& ps : spec.parts) {
      Part p;
      p.encoding = make_encoding<T>(ps.config, ps.path, ps.n_dims);
      p.paddable = dynamic_cast<CpuEncoding*>(p.encoding.get());
      p.begin = ps.begin;
      p.n_dims = ps.n_dims;
      p.param_offset = n_params_;
      n_params_ += p.encoding->n_params();
      parts_.push_back(std::move(p));
    }
    if (parts_.empty()) return;

    std::vector<uint32_t> natural(parts_.size());
    for (size_t i = 0; i < parts_.size(); ++i) natural[i] = natural_width(parts_[i]);
    if (reduction_ == ReductionType::Concatenation) {
      uint32_t so_far = 0;
      for (size_t i = 0; i + 1 < parts_.size(); ++i) {
        const uint32_t next_alignment = cpu::required_output_alignment(*parts_[i + 1].encoding);
        set_part_width(parts_[i], next_multiple(so_far + natural[i], next_alignment) - so_far);
        so_far += parts_[i].width();
      }
      set_part_width(parts_.back(), natural.back());
      natural_width_ = so_far + natural.back();
    } else {
      const uint32_t alignment = required_output_alignment();
      for (size_t i = 0; i < parts_.size(); ++i) set_part_width(parts_[i], next_multiple(natural[i], alignment));
      for (size_t i = 1; i < parts_.size(); ++i) {
        if (parts_[i].width() != parts_[0].width())
          throw ConfigError(path + ".reduction", "\"" + to_string(reduction_) + "\"",
                            "nested encodings have different output widths (" + spec.parts[0].path + ": " +
                                std::to_string(parts_[0].width()) + ", " + spec.parts[i].path + ": " +
                                std::to_string(parts_[i].width()) + ") and " + to_string(reduction_) +
                                " needs equal ones",
                            "Concatenation, or nested encodings of equal output width");
      }
      natural_width_ = parts_[0].width();
    }
  }

  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return dtype_of<T>::value; }
  DType input_dtype() const override { return dtype_of<T>::value; }
  DType output_dtype() const override { return dtype_of<T>::value; }
  uint32_t input_width() const override { return n_in_; }
  uint32_t output_width() const override { return natural_width_; }
  uint32_t padded_output_width() const override {
    if (parts_.empty()) return empty_padding_;
    if (reduction_ != ReductionType::Concatenation) return parts_[0].width();
    uint32_t total = 0;
    for (const auto& p : parts_) total += p.width();
    return total;
  }

  void set_padded_output_width(uint32_t width) override {
    if (width < natural_width_)
      throw ShapeError("Composite: padded output width " + std::to_string(width) + " is below its output width " +
                       std::to_string(natural_width_));
    if (parts_.empty()) {
      empty_padding_ = width;
    } else if (reduction_ == ReductionType::Concatenation) {
      set_part_width(parts_.back(), width - (padded_output_width() - parts_.back().width()));
    } else {
      for (auto& p : parts_) set_part_width(p, width);
    }
  }

  uint32_t required_output_alignment() const override {
    uint32_t alignment = 1;
    for (const auto& p : parts_) alignment = std::lcm(alignment, cpu::required_output_alignment(*p.encoding));
    return alignment;
  }

  size_t n_params() const override { return n_params_; }

  std::vector<ParamSegment> param_segments() const override {
    std::vector<ParamSegment> segs;
    for (const auto& p : parts_)
      for (ParamSegment s : p.encoding->param_segments()) {
        s.offset += p.param_offset;
        segs.push_back(s);
      }
    return segs;
  }

  void set_params(const TensorView& params, const TensorView& inference_params, const TensorView& gradients) override {
    for (const TensorView* t : {&params, &inference_params, &gradients})
      if (t->data != nullptr && (t->ndim != 1 || static_cast<size_t>(t->numel()) != n_params_))
        throw ShapeError("Composite::set_params: expected " + std::to_string(n_params_) + " parameters, got " +
                         t->describe());
    for (auto& p : parts_) {
      const int64_t off = static_cast<int64_t>(p.param_offset), n = static_cast<int64_t>(p.encoding->n_params());
      auto slice = [&](const TensorView& t) { return t.data == nullptr ? t : t.rows_slice(off, n); };
      p.encoding->set_params(slice(params), slice(inference_params), slice(gradients));
    }
  }

  void initialize_params(Pcg32& rng, float* params, float scale) override {
    for (auto& p : parts_) p.encoding->initialize_params(rng, params + p.param_offset, scale);
  }

  json hyperparams() const override {
    json nested = json::array();
    for (const auto& p : parts_) {
      json h = p.encoding->hyperparams();
      if (!h.is_object()) h = json{{"otype", p.encoding->name()}};
      h["n_dims_to_encode"] = p.n_dims;
      h["dims_to_encode_begin"] = p.begin;
      nested.push_back(std::move(h));
    }
    return {{"otype", "Composite"}, {"reduction", to_string(reduction_)}, {"nested", std::move(nested)}};
  }
  std::string name() const override { return "Composite"; }

  void inference(const TensorView& input, const TensorView& output) override {
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    check_matrix(output, "output", input.rows(), padded_output_width(), dtype_of<T>::value, Device::CPU);
    Ctx ctx;
    converting_bad_alloc([&] { run(input, &output, ctx, false, false, /*inference=*/true); });
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool prepare_input_gradients) override {
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    if (output) check_matrix(*output, "output", input.rows(), padded_output_width(), dtype_of<T>::value, Device::CPU);
    auto ctx = std::make_unique<Ctx>();
    converting_bad_alloc([&] { run(input, output, *ctx, use_inference_params, prepare_input_gradients, false); });
    return ctx;
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& output, const TensorView& dL_doutput,
                const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    converting_bad_alloc([&] { backward_impl(base_ctx, input, output, dL_doutput, dL_dinput, use_inference_params, mode); });
  }

  // Each part's backward() saw h_i = dL/d(its output) (for Product: dL/dy times the other parts'
  // outputs), so with v_i the part's columns of v = dL2/d(dL/dinput) and t_i = J_i v_i (the
  // part's own dL2/d(dL/d its output)):
  //  * the part's backward_backward_input(v_i, h_i) gives its parameter and Hessian terms and t_i;
  //  * dL2/d(dL/dy) gathers t_i (Concatenation: in the part's columns; Sum: summed; Product:
  //    t_i times the other parts' outputs, summed);
  //  * Product only: h_i depends on the other parts' outputs, so part i also gets the first-order
  //    upstream r_i = dL/dy * sum over k != i of t_k * (the outputs of the parts other than i, k),
  //    passed through its backward() (parameters accumulated, input gradient added).
  void backward_backward_input(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    converting_bad_alloc([&] {
      second_order_impl(base_ctx, input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, use_inference_params, mode);
    });
  }

 private:
  void second_order_impl(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                         const TensorView& dL_doutput, const TensorView* dL_ddLdoutput, const TensorView* dL_dinput,
                         bool use_inference_params, GradientMode mode) {
    const auto* ctx = dynamic_cast<const Ctx*>(&base_ctx);
    if (!ctx || ctx->nested.size() != parts_.size())
      throw Error("Composite::backward_backward_input: context does not come from this encoding's forward()");
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    for (size_t i = 0; i < parts_.size(); ++i)
      if (ctx->outputs[i].size() != static_cast<size_t>(batch) * parts_[i].encoding->padded_output_width())
        throw ShapeError("Composite::backward_backward_input: input batch " + std::to_string(batch) +
                         " differs from the forward() that made the context");
    const uint32_t width = padded_output_width();
    check_matrix(dL_ddLdinput, "dL_ddLdinput", batch, n_in_, dtype_of<T>::value, Device::CPU);
    check_matrix(dL_doutput, "dL_doutput", batch, width, dtype_of<T>::value, Device::CPU);
    if (dL_ddLdoutput) check_matrix(*dL_ddLdoutput, "dL_ddLdoutput", batch, width, dtype_of<T>::value, Device::CPU);
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", batch, n_in_, dtype_of<T>::value, Device::CPU);
    // The copies below: per part h, v, input, t and the Hessian term, plus every part's t for Product.
    int64_t per_row = 0;
    for (const Part& p : parts_)
      per_row = std::max<int64_t>(per_row, 2 * int64_t{p.encoding->padded_output_width()} + 3 * int64_t{p.n_dims}) +
                (reduction_ == ReductionType::Product ? p.encoding->padded_output_width() : 0);
    checked_bytes({batch, per_row, int64_t{sizeof(T)}},
                  "Composite's second-order per-part copies of a batch of " + std::to_string(batch));

    auto at = [](const TensorView& t, int64_t b, uint32_t j) -> T& { return t.ptr<T>()[b * t.strides[0] + j * t.strides[1]]; };
    auto zero = [&](const TensorView& t) {
      parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (int64_t j = 0; j < t.cols(); ++j) at(t, b, static_cast<uint32_t>(j)) = T(0);
      });
    };
    if (dL_ddLdoutput) zero(*dL_ddLdoutput);
    if (dL_dinput) zero(*dL_dinput);
    const bool product = reduction_ == ReductionType::Product && parts_.size() > 1;
    std::vector<std::vector<T>> t(parts_.size());  // each part's J_i v_i, batch-major
    uint32_t column = 0;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      const uint32_t part_column = column, pw = p.encoding->padded_output_width();
      column += p.width();
      const bool wants_params = p.encoding->n_params() > 0 && mode != GradientMode::Ignore;
      const bool wants_t = dL_ddLdoutput || product;
      if (!wants_params && !wants_t && !dL_dinput) continue;
      std::vector<T> h = part_upstream(*ctx, dL_doutput, i, part_column);
      std::vector<T> part_in = gather_input(input, p), part_v = gather_columns(dL_ddLdinput, p);
      t[i].assign(wants_t ? static_cast<size_t>(batch) * pw : 0, T(0));
      std::vector<T> hx(dL_dinput ? static_cast<size_t>(batch) * p.n_dims : 0);
      TensorView t_view = TensorView::matrix(t[i].data(), batch, pw), hx_view = TensorView::matrix(hx.data(), batch, p.n_dims);
      p.encoding->backward_backward_input(*ctx->nested[i], TensorView::matrix(part_in.data(), batch, p.n_dims),
                                          TensorView::matrix(part_v.data(), batch, p.n_dims),
                                          TensorView::matrix(h.data(), batch, pw), wants_t ? &t_view : nullptr,
                                          dL_dinput ? &hx_view : nullptr, use_inference_params, mode);
      if (dL_dinput) scatter_add(*dL_dinput, hx, p);
      if (!dL_ddLdoutput) continue;
      parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (uint32_t j = 0; j < pw; ++j) {
            T value = t[i][b * pw + j];
            if (product)
              for (size_t k = 0; k < parts_.size(); ++k)
                if (k != i) value *= part_value(*ctx, k, b, j);
            at(*dL_ddLdoutput, b, reduction_ == ReductionType::Concatenation ? part_column + j : j) += value;
          }
      });
    }
    if (!product) return;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      const bool wants_params = p.encoding->n_params() > 0 && mode != GradientMode::Ignore;
      if (!wants_params && !dL_dinput) continue;
      const uint32_t pw = p.encoding->padded_output_width();
      std::vector<T> r(static_cast<size_t>(batch) * pw);
      parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (uint32_t j = 0; j < pw; ++j) {
            T sum = T(0);
            for (size_t k = 0; k < parts_.size(); ++k) {
              const uint32_t pwk = parts_[k].encoding->padded_output_width();
              if (k == i || j >= pwk) continue;  // columns past a part's own output are constant ones
              T term = t[k][b * pwk + j];
              for (size_t m = 0; m < parts_.size(); ++m)
                if (m != i && m != k) term *= part_value(*ctx, m, b, j);
              sum += term;
            }
            r[b * pw + j] = at(dL_doutput, b, j) * sum;
          }
      });
      std::vector<T> part_in = gather_input(input, p);
      std::vector<T> d_in(dL_dinput ? static_cast<size_t>(batch) * p.n_dims : 0);
      TensorView d_in_view = TensorView::matrix(d_in.data(), batch, p.n_dims);
      p.encoding->backward(*ctx->nested[i], TensorView::matrix(part_in.data(), batch, p.n_dims),
                           TensorView::matrix(const_cast<T*>(ctx->outputs[i].data()), batch, pw),
                           TensorView::matrix(r.data(), batch, pw), dL_dinput ? &d_in_view : nullptr,
                           use_inference_params, mode == GradientMode::Ignore ? mode : GradientMode::Accumulate);
      if (dL_dinput) scatter_add(*dL_dinput, d_in, p);
    }
  }

  void backward_impl(const Context& base_ctx, const TensorView& input, const TensorView&, const TensorView& dL_doutput,
                     const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) {
    const auto* ctx = dynamic_cast<const Ctx*>(&base_ctx);
    if (!ctx || ctx->nested.size() != parts_.size())
      throw Error("Composite::backward: context does not come from this encoding's forward()");
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    check_scratch(batch);
    // Before dL_dinput is cleared below: the nested backward() calls would find out too late.
    for (size_t i = 0; i < parts_.size(); ++i)
      if (ctx->outputs[i].size() != static_cast<size_t>(batch) * parts_[i].encoding->padded_output_width())
        throw ShapeError("Composite::backward: input batch " + std::to_string(batch) +
                         " differs from the forward() that made the context");
    check_matrix(dL_doutput, "dL_doutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    if (dL_dinput) {
      check_matrix(*dL_dinput, "dL_dinput", batch, n_in_, dtype_of<T>::value, Device::CPU);
      T* gx = dL_dinput->ptr<T>();
      parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (uint32_t d = 0; d < n_in_; ++d) gx[b * dL_dinput->strides[0] + d * dL_dinput->strides[1]] = T(0);
      });
    }
    uint32_t column = 0;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      const uint32_t part_column = column;
      column += p.width();
      const bool wants_params = p.encoding->n_params() > 0 && mode != GradientMode::Ignore;
      if (!wants_params && !dL_dinput) continue;

      const uint32_t pw = p.encoding->padded_output_width();
      std::vector<T> d_out = part_upstream(*ctx, dL_doutput, i, part_column);
      std::vector<T> part_in = gather_input(input, p);
      std::vector<T> d_in(dL_dinput ? static_cast<size_t>(batch) * p.n_dims : 0);
      TensorView d_in_view = TensorView::matrix(d_in.data(), batch, p.n_dims);
      p.encoding->backward(*ctx->nested[i], TensorView::matrix(part_in.data(), batch, p.n_dims),
                           TensorView::matrix(const_cast<T*>(ctx->outputs[i].data()), batch, pw),
                           TensorView::matrix(d_out.data(), batch, pw), dL_dinput ? &d_in_view : nullptr,
                           use_inference_params, mode);
      if (dL_dinput) scatter_add(*dL_dinput, d_in, p);
    }
  }

  static constexpr int64_t kGrain = 128;

  struct Part {
    std::unique_ptr<Encoding> encoding;
    CpuEncoding* paddable = nullptr;  // null: the composite writes this part's padding
    uint32_t begin = 0, n_dims = 0;
    uint32_t extra_padding = 0;  // ones the composite writes after the part's own padded output (see above)
    size_t param_offset = 0;
    uint32_t width() const { return encoding->padded_output_width() + extra_padding; }
  };

  struct Ctx : Context {
    std::vector<std::unique_ptr<Context>> nested;
    std::vector<std::vector<T>> outputs;  // each part's own (padded) output, batch-major
  };

  // The part's width before any padding, as tiny-cuda-nn counts it.
  static uint32_t natural_width(Part& p) {
    if (p.paddable) return p.encoding->output_width();
    p.encoding->set_alignment(1);
    return p.encoding->padded_output_width();
  }

  static void set_part_width(Part& p, uint32_t width) {
    if (p.paddable) {
      p.paddable->set_padded_output_width(width);
      p.extra_padding = 0;
      return;
    }
    p.encoding->set_alignment(std::max(width, 1u));
    if (p.encoding->padded_output_width() == width) {
      p.extra_padding = 0;
      return;
    }
    p.encoding->set_alignment(1);
    const uint32_t own = p.encoding->padded_output_width();
    if (width < own)
      throw ShapeError("Composite: nested " + p.encoding->name() + " needs " + std::to_string(own) +
                       " output columns, got " + std::to_string(width));
    p.extra_padding = width - own;
  }

  // Column j of part k's output as the reduction sees it (its own padding or the composite's ones).
  T part_value(const Ctx& ctx, size_t k, int64_t b, uint32_t j) const {
    const uint32_t pw = parts_[k].encoding->padded_output_width();
    return j < pw ? ctx.outputs[k][b * pw + j] : T(1);
  }

  // The per-part copies are std::vectors: a failed allocation becomes tinyfuse's error.
  template <typename F>
  static void converting_bad_alloc(F&& f) {
    try {
      f();
    } catch (const std::bad_alloc&) {
      throw OutOfMemoryError(0, "Composite's per-part copies", "an allocation failed");
    }
  }

  // Refuses, before anything is allocated, a batch whose per-part copies cannot fit: every
  // part's output (kept for backward) plus the largest part's input and gradient copies.
  void check_scratch(int64_t batch) const {
    int64_t per_row = 0, transient = 0;
    for (const Part& p : parts_) {
      per_row += p.encoding->padded_output_width();
      transient = std::max<int64_t>(transient, int64_t{p.encoding->padded_output_width()} + 2 * int64_t{p.n_dims});
    }
    checked_bytes({batch, per_row + transient, int64_t{sizeof(T)}}, "Composite's per-part copies of a batch of " + std::to_string(batch));
  }

  std::vector<T> gather_input(const TensorView& input, const Part& p) const { return gather_columns(input, p); }

  // dL/d(part i's own padded output) given dL/dy, as backward() passes it on.
  std::vector<T> part_upstream(const Ctx& ctx, const TensorView& dL_doutput, size_t i, uint32_t part_column) const {
    const int64_t batch = dL_doutput.rows();
    const uint32_t pw = parts_[i].encoding->padded_output_width();
    std::vector<T> d_out(static_cast<size_t>(batch) * pw);
    const T* g = dL_doutput.ptr<T>();
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const T* grow = g + b * dL_doutput.strides[0];
        for (uint32_t j = 0; j < pw; ++j) {
          const uint32_t col = reduction_ == ReductionType::Concatenation ? part_column + j : j;
          T v = grow[col * dL_doutput.strides[1]];
          if (reduction_ == ReductionType::Product)
            for (size_t k = 0; k < parts_.size(); ++k)
              if (k != i) v *= part_value(ctx, k, b, j);
          d_out[b * pw + j] = v;
        }
      }
    });
    return d_out;
  }

  // Adds a part's (batch, n_dims) input gradient into the composite's columns it reads.
  void scatter_add(const TensorView& dL_dinput, const std::vector<T>& part_grad, const Part& p) const {
    T* gx = dL_dinput.ptr<T>();
    parallel_for(dL_dinput.rows(), kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (uint32_t d = 0; d < p.n_dims; ++d)
          gx[b * dL_dinput.strides[0] + (p.begin + d) * dL_dinput.strides[1]] += part_grad[b * p.n_dims + d];
    });
  }

  // Columns [p.begin, p.begin + p.n_dims) of a (batch, n_in) matrix, dense.
  std::vector<T> gather_columns(const TensorView& m, const Part& p) const {
    const int64_t batch = m.rows();
    std::vector<T> v(static_cast<size_t>(batch) * p.n_dims);
    const T* x = m.ptr<T>();
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (uint32_t d = 0; d < p.n_dims; ++d) v[b * p.n_dims + d] = x[b * m.strides[0] + (p.begin + d) * m.strides[1]];
    });
    return v;
  }

  void run(const TensorView& input, const TensorView* output, Ctx& ctx, bool use_inference_params,
           bool prepare_input_gradients, bool inference) {
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    check_scratch(batch);
    ctx.nested.resize(parts_.size());
    ctx.outputs.resize(parts_.size());
    for (size_t i = 0; i < parts_.size(); ++i) {
      Part& p = parts_[i];
      std::vector<T> part_in = gather_input(input, p);
      const uint32_t pw = p.encoding->padded_output_width();
      ctx.outputs[i].assign(static_cast<size_t>(batch) * pw, T(0));
      TensorView in_view = TensorView::matrix(part_in.data(), batch, p.n_dims);
      TensorView out_view = TensorView::matrix(ctx.outputs[i].data(), batch, pw);
      if (inference) p.encoding->inference(in_view, out_view);
      else ctx.nested[i] = p.encoding->forward(in_view, &out_view, use_inference_params, prepare_input_gradients);
    }
    if (!output) return;

    T* y = output->ptr<T>();
    const uint32_t width = padded_output_width();
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T* row = y + b * output->strides[0];
        auto at = [&](uint32_t col) -> T& { return row[col * output->strides[1]]; };
        if (parts_.empty()) {
          for (uint32_t j = 0; j < width; ++j) at(j) = T(1);
        } else if (reduction_ == ReductionType::Concatenation) {
          uint32_t col = 0;
          for (size_t k = 0; k < parts_.size(); ++k)
            for (uint32_t j = 0; j < parts_[k].width(); ++j) at(col++) = part_value(ctx, k, b, j);
        } else {
          for (uint32_t j = 0; j < width; ++j) {
            T acc = reduction_ == ReductionType::Sum ? T(0) : T(1);
            for (size_t k = 0; k < parts_.size(); ++k) {
              if (reduction_ == ReductionType::Sum) acc += part_value(ctx, k, b, j);
              else acc *= part_value(ctx, k, b, j);
            }
            at(j) = acc;
          }
        }
      }
    });
  }

  uint32_t n_in_;
  ReductionType reduction_;
  std::vector<Part> parts_;
  size_t n_params_ = 0;
  uint32_t natural_width_ = 0;
  uint32_t empty_padding_ = 0;  // width when no part encodes anything
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_composite_encoding(const json& config, const std::string& path, uint32_t n_dims) {
  const CompositeSpec spec = parse_composite_config(config, path, n_dims);
  return std::make_unique<CompositeEncoding<T>>(spec, path, n_dims);
}

template <typename T>
std::unique_ptr<Encoding> make_nrc_encoding(const json& config, const std::string& path, uint32_t n_dims) {
  const NrcSpec nrc = parse_nrc_config(config, path, n_dims);
  const CompositeSpec spec = parse_composite_config(nrc_composite_config(nrc), path, n_dims);
  return std::make_unique<CompositeEncoding<T>>(spec, path, n_dims);
}

template std::unique_ptr<Encoding> make_composite_encoding<float>(const json&, const std::string&, uint32_t);
template std::unique_ptr<Encoding> make_composite_encoding<double>(const json&, const std::string&, uint32_t);
template std::unique_ptr<Encoding> make_nrc_encoding<float>(const json&, const std::string&, uint32_t);
template std::unique_ptr<Encoding> make_nrc_encoding<double>(const json&, const std::string&, uint32_t);

}  // namespace tinyfuse::cpu
