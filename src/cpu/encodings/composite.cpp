// Composite on the CPU: the layout is core's (core/encodings/composite_layout.h); this file
// moves the data. Each part encodes a copy of its input columns into its own buffer, which the
// composite then concatenates or reduces into the output (and keeps for Product's backward).
#include "cpu/encodings/composite.h"

#include <algorithm>
#include <new>

#include "core/encodings/composite_layout.h"
#include "core/host_memory.h"
#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class CompositeEncoding final : public CompositeEncodingBase<PaddableEncoding> {
 public:
  CompositeEncoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims, const EncodingBackend& backend)
      : CompositeEncodingBase<PaddableEncoding>(spec, path, n_dims, backend) {}

  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return dtype_of<T>::value; }
  DType input_dtype() const override { return dtype_of<T>::value; }
  DType output_dtype() const override { return dtype_of<T>::value; }

  void inference(const TensorView& input, const TensorView& output) override {
    check_matrix(input, "input", -1, input_width(), dtype_of<T>::value, Device::CPU);
    check_matrix(output, "output", input.rows(), padded_output_width(), dtype_of<T>::value, Device::CPU);
    Ctx ctx;
    converting_bad_alloc([&] { run(input, &output, ctx, false, false, /*inference=*/true); });
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool prepare_input_gradients) override {
    check_matrix(input, "input", -1, input_width(), dtype_of<T>::value, Device::CPU);
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
    if (!ctx || ctx->nested.size() != parts().size())
      throw Error("Composite::backward_backward_input: context does not come from this encoding's forward()");
    check_matrix(input, "input", -1, input_width(), dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    for (size_t i = 0; i < parts().size(); ++i)
      if (ctx->outputs[i].size() != static_cast<size_t>(batch) * parts()[i].encoding->padded_output_width())
        throw ShapeError("Composite::backward_backward_input: input batch " + std::to_string(batch) +
                         " differs from the forward() that made the context");
    const uint32_t width = padded_output_width();
    check_matrix(dL_ddLdinput, "dL_ddLdinput", batch, input_width(), dtype_of<T>::value, Device::CPU);
    check_matrix(dL_doutput, "dL_doutput", batch, width, dtype_of<T>::value, Device::CPU);
    if (dL_ddLdoutput) check_matrix(*dL_ddLdoutput, "dL_ddLdoutput", batch, width, dtype_of<T>::value, Device::CPU);
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", batch, input_width(), dtype_of<T>::value, Device::CPU);
    // The copies below: per part h, v, input, t and the Hessian term, plus every part's t for Product.
    int64_t per_row = 0;
    for (const CompositePart& p : parts())
      per_row = std::max<int64_t>(per_row, 2 * int64_t{p.encoding->padded_output_width()} + 3 * int64_t{p.n_dims}) +
                (reduction() == ReductionType::Product ? p.encoding->padded_output_width() : 0);
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
    const bool product = reduction() == ReductionType::Product && parts().size() > 1;
    std::vector<std::vector<T>> t(parts().size());  // each part's J_i v_i, batch-major
    for (size_t i = 0; i < parts().size(); ++i) {
      const CompositePart& p = parts()[i];
      const uint32_t part_column = layout_.column(i), pw = p.encoding->padded_output_width();
      const bool wants_t = dL_ddLdoutput || product;
      if (!wants_t && !CompositeLayout::backward_needed(p, mode, dL_dinput != nullptr)) continue;
      std::vector<T> h = part_upstream(*ctx, dL_doutput, i);
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
              for (size_t k = 0; k < parts().size(); ++k)
                if (k != i) value *= part_value(*ctx, k, b, j);
            at(*dL_ddLdoutput, b, reduction() == ReductionType::Concatenation ? part_column + j : j) += value;
          }
      });
    }
    if (!product) return;
    for (size_t i = 0; i < parts().size(); ++i) {
      const CompositePart& p = parts()[i];
      if (!CompositeLayout::backward_needed(p, mode, dL_dinput != nullptr)) continue;
      const uint32_t pw = p.encoding->padded_output_width();
      std::vector<T> r(static_cast<size_t>(batch) * pw);
      parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (uint32_t j = 0; j < pw; ++j) {
            T sum = T(0);
            for (size_t k = 0; k < parts().size(); ++k) {
              const uint32_t pwk = parts()[k].encoding->padded_output_width();
              if (k == i || j >= pwk) continue;  // columns past a part's own output are constant ones
              T term = t[k][b * pwk + j];
              for (size_t m = 0; m < parts().size(); ++m)
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
    if (!ctx || ctx->nested.size() != parts().size())
      throw Error("Composite::backward: context does not come from this encoding's forward()");
    check_matrix(input, "input", -1, input_width(), dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    check_scratch(batch);
    // Before dL_dinput is cleared below: the nested backward() calls would find out too late.
    for (size_t i = 0; i < parts().size(); ++i)
      if (ctx->outputs[i].size() != static_cast<size_t>(batch) * parts()[i].encoding->padded_output_width())
        throw ShapeError("Composite::backward: input batch " + std::to_string(batch) +
                         " differs from the forward() that made the context");
    check_matrix(dL_doutput, "dL_doutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    if (dL_dinput) {
      check_matrix(*dL_dinput, "dL_dinput", batch, input_width(), dtype_of<T>::value, Device::CPU);
      T* gx = dL_dinput->ptr<T>();
      const uint32_t n_in = input_width();
      parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
          for (uint32_t d = 0; d < n_in; ++d) gx[b * dL_dinput->strides[0] + d * dL_dinput->strides[1]] = T(0);
      });
    }
    for (size_t i = 0; i < parts().size(); ++i) {
      const CompositePart& p = parts()[i];
      if (!CompositeLayout::backward_needed(p, mode, dL_dinput != nullptr)) continue;
      const uint32_t pw = p.encoding->padded_output_width();
      std::vector<T> d_out = part_upstream(*ctx, dL_doutput, i);
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

  struct Ctx : Context {
    std::vector<std::unique_ptr<Context>> nested;
    std::vector<std::vector<T>> outputs;  // each part's own (padded) output, batch-major
  };

  // Column j of part k's output as the reduction sees it (its own padding or the composite's ones).
  T part_value(const Ctx& ctx, size_t k, int64_t b, uint32_t j) const {
    const uint32_t pw = parts()[k].encoding->padded_output_width();
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
    for (const CompositePart& p : parts()) {
      per_row += p.encoding->padded_output_width();
      transient = std::max<int64_t>(transient, int64_t{p.encoding->padded_output_width()} + 2 * int64_t{p.n_dims});
    }
    checked_bytes({batch, per_row + transient, int64_t{sizeof(T)}}, "Composite's per-part copies of a batch of " + std::to_string(batch));
  }

  std::vector<T> gather_input(const TensorView& input, const CompositePart& p) const { return gather_columns(input, p); }

  // dL/d(part i's own padded output) given dL/dy, as backward() passes it on.
  std::vector<T> part_upstream(const Ctx& ctx, const TensorView& dL_doutput, size_t i) const {
    const int64_t batch = dL_doutput.rows();
    const uint32_t pw = parts()[i].encoding->padded_output_width(), part_column = layout_.column(i);
    std::vector<T> d_out(static_cast<size_t>(batch) * pw);
    const T* g = dL_doutput.ptr<T>();
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const T* grow = g + b * dL_doutput.strides[0];
        for (uint32_t j = 0; j < pw; ++j) {
          const uint32_t col = reduction() == ReductionType::Concatenation ? part_column + j : j;
          T v = grow[col * dL_doutput.strides[1]];
          if (reduction() == ReductionType::Product)
            for (size_t k = 0; k < parts().size(); ++k)
              if (k != i) v *= part_value(ctx, k, b, j);
          d_out[b * pw + j] = v;
        }
      }
    });
    return d_out;
  }

  // Adds a part's (batch, n_dims) input gradient into the composite's columns it reads.
  void scatter_add(const TensorView& dL_dinput, const std::vector<T>& part_grad, const CompositePart& p) const {
    T* gx = dL_dinput.ptr<T>();
    parallel_for(dL_dinput.rows(), kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (uint32_t d = 0; d < p.n_dims; ++d)
          gx[b * dL_dinput.strides[0] + (p.begin + d) * dL_dinput.strides[1]] += part_grad[b * p.n_dims + d];
    });
  }

  // Columns [p.begin, p.begin + p.n_dims) of a (batch, n_in) matrix, dense.
  std::vector<T> gather_columns(const TensorView& m, const CompositePart& p) const {
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
    check_matrix(input, "input", -1, input_width(), dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    check_scratch(batch);
    ctx.nested.resize(parts().size());
    ctx.outputs.resize(parts().size());
    for (size_t i = 0; i < parts().size(); ++i) {
      const CompositePart& p = parts()[i];
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
        if (parts().empty()) {
          for (uint32_t j = 0; j < width; ++j) at(j) = T(1);
        } else if (reduction() == ReductionType::Concatenation) {
          uint32_t col = 0;
          for (size_t k = 0; k < parts().size(); ++k)
            for (uint32_t j = 0; j < parts()[k].width(); ++j) at(col++) = part_value(ctx, k, b, j);
        } else {
          for (uint32_t j = 0; j < width; ++j) {
            T acc = reduction() == ReductionType::Sum ? T(0) : T(1);
            for (size_t k = 0; k < parts().size(); ++k) {
              if (reduction() == ReductionType::Sum) acc += part_value(ctx, k, b, j);
              else acc *= part_value(ctx, k, b, j);
            }
            at(j) = acc;
          }
        }
      }
    });
  }
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_composite_encoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims,
                                                  const EncodingBackend& backend) {
  return std::make_unique<CompositeEncoding<T>>(spec, path, n_dims, backend);
}

template std::unique_ptr<Encoding> make_composite_encoding<float>(const CompositeSpec&, const std::string&, uint32_t,
                                                                  const EncodingBackend&);
template std::unique_ptr<Encoding> make_composite_encoding<double>(const CompositeSpec&, const std::string&, uint32_t,
                                                                   const EncodingBackend&);

}  // namespace tinyfuse::cpu
