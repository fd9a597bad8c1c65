// Composite on CUDA. Concatenation: every part reads its column slice of the input and writes its
// column slice of the composite's output in place (strided views, the composite's dtype), and in
// backward reads its slice of dL_doutput the same way: no copies. Sum / Product: the parts write
// F32 scratch blocks that one kernel reduces into the output (Product's backward needs them
// again: they stay in the context); in backward each part of an F32 Sum reads dL_doutput itself,
// other cases get their F32 dL/d(part) from one kernel. Input gradients: a part whose dims no other part reads writes
// its columns of dL_dinput in place; parts sharing dims add theirs in (so shared dims get the sum,
// as on the CPU), and dims read by no part are 0.
// The layout (part widths, padding, parameter slices) is core's (core/encodings/composite_layout.h).
#include "cuda/encodings/composite.h"

#include "core/encodings/composite_layout.h"
#include "cuda/common.cuh"
#include "cuda/encodings/gpu_encoding.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

// out[r, j] = sum (or product) over k of parts[k][r, j]; parts: n_parts dense (batch, width) blocks.
template <typename T>
__global__ void reduce_parts_kernel(bool product, const float* __restrict__ parts, uint32_t n_parts, int64_t batch,
                                    uint32_t width, T* __restrict__ out, int64_t ldo) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * width) return;
  const int64_t block = batch * width;
  float acc = product ? 1.0f : 0.0f;
  for (uint32_t k = 0; k < n_parts; ++k) {
    const float v = parts[k * block + i];
    acc = product ? acc * v : acc + v;
  }
  out[(i / width) * ldo + i % width] = from_float<T>(acc);
}

// d[r, j] = g[r, j] (Sum), or g[r, j] times every part's [r, j] but part `skip`'s (Product), in F32.
template <typename T>
__global__ void part_gradient_kernel(bool product, const T* __restrict__ g, int64_t ldg, const float* __restrict__ parts,
                                     uint32_t n_parts, uint32_t skip, int64_t batch, uint32_t width, float* __restrict__ d) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * width) return;
  float v = to_float(g[(i / width) * ldg + i % width]);
  if (product) {
    const int64_t block = batch * width;
    for (uint32_t k = 0; k < n_parts; ++k)
      if (k != skip) v *= parts[k * block + i];
  }
  d[i] = v;
}

// dst[r, j] += src[r, j] for a dense (batch, n) src.
__global__ void add_columns_kernel(const float* __restrict__ src, int64_t batch, uint32_t n, float* __restrict__ dst,
                                   int64_t ldd) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * n) return;
  dst[(i / n) * ldd + i % n] += src[i];
}

// dst[r, j] += src[r, j] for a dense (batch, n) F32 src into a T dst (rounded once).
template <typename T>
__global__ void add_features_kernel(const float* __restrict__ src, int64_t batch, uint32_t n, T* __restrict__ dst,
                                    int64_t ldd) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= batch * n) return;
  T& d = dst[(i / n) * ldd + i % n];
  d = from_float<T>(to_float(d) + src[i]);
}

TensorView on_stream(TensorView v, Stream s) {
  v.stream = s;
  return v;
}

class GpuCompositeEncoding final : public CompositeEncodingBase<GpuEncoding> {
 public:
  GpuCompositeEncoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims, const EncodingBackend& backend)
      : CompositeEncodingBase<GpuEncoding>(spec, path, n_dims, backend) {}

  // Concatenated parts write the composite's dtype themselves; reduced parts stay F32 (the
  // reduction rounds once).
  void set_output_dtype(DType dtype) override {
    GpuEncoding::set_output_dtype(dtype);
    if (reduction() == ReductionType::Concatenation)
      for (auto& p : parts()) p.encoding->set_output_dtype(dtype);
  }

  // The parts' parameter dtype (they share the composite's slice of one buffer).
  DType param_dtype() const override {
    for (const auto& p : parts())
      if (p.encoding->n_params() > 0) return p.encoding->param_dtype();
    return DType::F32;
  }

  void inference(const TensorView& input, const TensorView& output) override { run(input, &output, nullptr, true, false); }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool prepare_input_gradients) override {
    auto ctx = std::make_unique<Ctx>();
    run(input, output, ctx.get(), use_inference_params, prepare_input_gradients);
    return ctx;
  }

  void backward(const Context& base_ctx, const TensorView& input, const TensorView& output, const TensorView& dL_doutput,
                const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    const auto* ctx = dynamic_cast<const Ctx*>(&base_ctx);
    if (!ctx || ctx->nested.size() != parts().size())
      throw Error("Composite::backward: context does not come from this encoding's forward()");
    check_input(input);
    const int64_t batch = input.rows();
    if (ctx->batch != batch)
      throw ShapeError("Composite::backward: input batch differs from the forward() that made the context");
    check_features(dL_doutput, "dL_doutput", batch);
    if (dL_dinput) check_input_gradient(*dL_dinput, batch);
    const Stream s = input.stream;
    const gpuStream_t stream = stream_of(input);
    if (dL_dinput && !layout_.all_dims_owned() && batch > 0) fill_tensor(on_stream(*dL_dinput, s), 0.0);

    const bool reduced = reduction() != ReductionType::Concatenation;
    const uint32_t width = padded_output_width();
    Buffer d_part, d_in;  // reductions: a part's dL/d(its output); shared dims: a part's input gradients
    if (reduced && !(reduction() == ReductionType::Sum && output_dtype() == DType::F32))
      d_part = Buffer::on_stream(Device::CUDA, static_cast<size_t>(batch) * width * sizeof(float), s);
    if (dL_dinput) d_in = Buffer::on_stream(Device::CUDA, static_cast<size_t>(batch) * layout_.max_shared_dims() * sizeof(float), s);

    for (size_t i = 0; i < parts().size(); ++i) {
      const CompositePart& p = parts()[i];
      if (!CompositeLayout::backward_needed(p, mode, dL_dinput != nullptr)) continue;
      const uint32_t part_column = layout_.column(i);
      const uint32_t pw = p.encoding->padded_output_width();
      TensorView d_out, out;
      if (!reduced) {
        d_out = on_stream(dL_doutput.cols_slice(part_column, pw), s);
        if (output.data) out = on_stream(output.cols_slice(part_column, pw), s);
      } else {
        if (reduction() == ReductionType::Sum && output_dtype() == DType::F32) {
          d_out = on_stream(dL_doutput.cols_slice(0, pw), s);  // every part of a sum gets dL_doutput itself
        } else {
          if (batch > 0) launch_part_gradient(dL_doutput, *ctx, i, batch, static_cast<float*>(d_part.data()), stream);
          d_out = TensorView::matrix(static_cast<float*>(d_part.data()), batch, width, Device::CUDA, s).cols_slice(0, pw);
        }
        out = part_block(*ctx, i, batch, s).cols_slice(0, pw);
      }
      TensorView d_input;
      if (dL_dinput)
        d_input = p.owns_dims ? on_stream(dL_dinput->cols_slice(p.begin, p.n_dims), s)
                              : TensorView::matrix(static_cast<float*>(d_in.data()), batch, p.n_dims, Device::CUDA, s);
      p.encoding->backward(*ctx->nested[i], part_input(input, p), out, d_out, dL_dinput ? &d_input : nullptr,
                           use_inference_params, mode);
      if (dL_dinput && !p.owns_dims && batch > 0) {
        add_columns_kernel<<<blocks_for(batch * p.n_dims), kThreadsPerBlock, 0, stream>>>(
            static_cast<const float*>(d_in.data()), batch, p.n_dims, dL_dinput->ptr<float>() + p.begin,
            dL_dinput->strides[0]);
        TF_GPU_CHECK_LAUNCH("Composite input-gradient sum");
      }
    }
  }

  // Second derivatives for Concatenation and Sum: each part's own, routed as backward() routes its
  // gradients. A part's dL2/d(dL/d its output) fills its columns (Concatenation; its extra padding
  // gets 0) or is summed into the output's (Sum); its Hessian term goes to its input dims as its
  // input gradient does. Product's cross terms between parts are computed on the CPU only.
  void backward_backward_input(const Context& base_ctx, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool use_inference_params, GradientMode mode) override {
    const auto* ctx = dynamic_cast<const Ctx*>(&base_ctx);
    if (!ctx || ctx->nested.size() != parts().size())
      throw Error("Composite::backward_backward_input: context does not come from this encoding's forward()");
    if (reduction() == ReductionType::Product && parts().size() > 1)
      throw UnsupportedError(
          "Composite::backward_backward_input: no second derivatives for reduction Product on cuda (the cross terms "
          "between its parts); on cuda Concatenation and Sum have them, on the CPU every reduction does");
    check_input(input);
    const int64_t batch = input.rows();
    if (ctx->batch != batch)
      throw ShapeError("Composite::backward_backward_input: input batch differs from the forward() that made the context");
    check_input_gradient(dL_ddLdinput, batch, "dL_ddLdinput");
    check_features(dL_doutput, "dL_doutput", batch);
    if (dL_ddLdoutput) check_features(*dL_ddLdoutput, "dL_ddLdoutput", batch);
    if (dL_dinput) check_input_gradient(*dL_dinput, batch);
    const Stream s = input.stream;
    const gpuStream_t stream = stream_of(input);
    const bool reduced = reduction() != ReductionType::Concatenation;
    const uint32_t width = padded_output_width();
    if (dL_dinput && !layout_.all_dims_owned() && batch > 0) fill_tensor(on_stream(*dL_dinput, s), 0.0);
    if (dL_ddLdoutput && reduced && batch > 0 && width > 0) fill_tensor(on_stream(*dL_ddLdoutput, s), 0.0);

    // Reduced parts are F32: they read dL_doutput itself where it is F32, else an F32 copy, and
    // write their dL2/d(dL/d output) to F32 scratch that is added in.
    Buffer h32, t32, d_in;
    const bool widen_h = reduced && output_dtype() != DType::F32;
    if (widen_h) {
      h32 = Buffer::on_stream(Device::CUDA, static_cast<size_t>(batch) * width * sizeof(float), s);
      if (batch > 0) launch_part_gradient(dL_doutput, *ctx, 0, batch, static_cast<float*>(h32.data()), stream);
    }
    if (reduced && dL_ddLdoutput) t32 = Buffer::on_stream(Device::CUDA, static_cast<size_t>(batch) * width * sizeof(float), s);
    if (dL_dinput) d_in = Buffer::on_stream(Device::CUDA, static_cast<size_t>(batch) * layout_.max_shared_dims() * sizeof(float), s);

    for (size_t i = 0; i < parts().size(); ++i) {
      const CompositePart& p = parts()[i];
      if (!dL_ddLdoutput && !CompositeLayout::backward_needed(p, mode, dL_dinput != nullptr)) continue;
      const uint32_t column = layout_.column(i), pw = p.encoding->padded_output_width();
      TensorView h, t;
      if (!reduced) {
        h = on_stream(dL_doutput.cols_slice(column, pw), s);
        if (dL_ddLdoutput) t = on_stream(dL_ddLdoutput->cols_slice(column, pw), s);
      } else {
        h = widen_h ? TensorView::matrix(static_cast<float*>(h32.data()), batch, width, Device::CUDA, s).cols_slice(0, pw)
                    : on_stream(dL_doutput.cols_slice(0, pw), s);
        if (dL_ddLdoutput) t = TensorView::matrix(static_cast<float*>(t32.data()), batch, pw, Device::CUDA, s);
      }
      TensorView hx;
      if (dL_dinput)
        hx = p.owns_dims ? on_stream(dL_dinput->cols_slice(p.begin, p.n_dims), s)
                         : TensorView::matrix(static_cast<float*>(d_in.data()), batch, p.n_dims, Device::CUDA, s);
      p.encoding->backward_backward_input(*ctx->nested[i], part_input(input, p),
                                          on_stream(dL_ddLdinput.cols_slice(p.begin, p.n_dims), s), h,
                                          dL_ddLdoutput ? &t : nullptr, dL_dinput ? &hx : nullptr, use_inference_params,
                                          mode);
      if (batch == 0) continue;
      if (dL_ddLdoutput && reduced && pw > 0) {
        const unsigned blocks = blocks_for(batch * pw);
        if (output_dtype() == DType::F16)
          add_features_kernel<__half><<<blocks, kThreadsPerBlock, 0, stream>>>(
              static_cast<const float*>(t32.data()), batch, pw, static_cast<__half*>(dL_ddLdoutput->data),
              dL_ddLdoutput->strides[0]);
        else
          add_features_kernel<float><<<blocks, kThreadsPerBlock, 0, stream>>>(
              static_cast<const float*>(t32.data()), batch, pw, static_cast<float*>(dL_ddLdoutput->data),
              dL_ddLdoutput->strides[0]);
        TF_GPU_CHECK_LAUNCH("Composite second-order sum");
      }
      if (dL_ddLdoutput && !reduced && p.extra_padding > 0)
        fill_tensor(on_stream(dL_ddLdoutput->cols_slice(column + pw, p.extra_padding), s), 0.0);
      if (dL_dinput && !p.owns_dims) {
        add_columns_kernel<<<blocks_for(batch * p.n_dims), kThreadsPerBlock, 0, stream>>>(
            static_cast<const float*>(d_in.data()), batch, p.n_dims, dL_dinput->ptr<float>() + p.begin,
            dL_dinput->strides[0]);
        TF_GPU_CHECK_LAUNCH("Composite second-order input sum");
      }
    }
    // Concatenation with no parts: only padding columns, constant.
    if (dL_ddLdoutput && !reduced && parts().empty() && batch > 0 && width > 0) fill_tensor(on_stream(*dL_ddLdoutput, s), 0.0);
  }

 private:
  struct Ctx : Context {
    std::vector<std::unique_ptr<Context>> nested;
    Buffer parts;  // reductions: every part's (batch, width) F32 output, one block after another
    int64_t batch = 0;
  };

  static TensorView part_input(const TensorView& input, const CompositePart& p) { return input.cols_slice(p.begin, p.n_dims); }

  TensorView part_block(const Ctx& ctx, size_t k, int64_t batch, Stream s) const {
    float* base = static_cast<float*>(ctx.parts.data()) + k * static_cast<size_t>(batch) * padded_output_width();
    return TensorView::matrix(base, batch, padded_output_width(), Device::CUDA, s);
  }

  void run(const TensorView& input, const TensorView* output, Ctx* ctx, bool use_inference_params,
           bool prepare_input_gradients) {
    check_input(input);
    const int64_t batch = input.rows();
    if (output) check_features(*output, "output", batch);
    const Stream s = input.stream;
    Ctx local;
    Ctx& c = ctx ? *ctx : local;
    c.batch = batch;
    c.nested.resize(parts().size());
    if (parts().empty()) {
      if (output && batch > 0 && output->cols() > 0) fill_tensor(on_stream(*output, s), 1.0);
      return;
    }
    auto encode = [&](size_t i, const TensorView* out) {
      const CompositePart& p = parts()[i];
      if (ctx) c.nested[i] = p.encoding->forward(part_input(input, p), out, use_inference_params, prepare_input_gradients);
      else p.encoding->inference(part_input(input, p), *out);
    };
    if (reduction() == ReductionType::Concatenation) {
      uint32_t column = 0;
      for (size_t i = 0; i < parts().size(); ++i) {
        const CompositePart& p = parts()[i];
        const uint32_t pw = p.encoding->padded_output_width();
        TensorView out;
        if (output) out = on_stream(output->cols_slice(column, pw), s);
        encode(i, output ? &out : nullptr);
        if (output && p.extra_padding > 0 && batch > 0)
          fill_tensor(on_stream(output->cols_slice(column + pw, p.extra_padding), s), 1.0);
        column += p.width();
      }
      return;
    }
    const uint32_t width = padded_output_width();
    c.parts = Buffer::on_stream(Device::CUDA, parts().size() * static_cast<size_t>(batch) * width * sizeof(float), s);
    for (size_t i = 0; i < parts().size(); ++i) {
      const CompositePart& p = parts()[i];
      const uint32_t pw = p.encoding->padded_output_width();
      const TensorView block = part_block(c, i, batch, s);
      const TensorView out = block.cols_slice(0, pw);
      encode(i, &out);
      if (p.extra_padding > 0 && batch > 0) fill_tensor(block.cols_slice(pw, p.extra_padding), 1.0);
    }
    if (!output || batch == 0 || width == 0) return;
    const bool product = reduction() == ReductionType::Product;
    const auto* blocks_of_parts = static_cast<const float*>(c.parts.data());
    const auto n_parts = static_cast<uint32_t>(parts().size());
    const unsigned blocks = blocks_for(batch * width);
    const gpuStream_t stream = stream_of(input);
    if (output_dtype() == DType::F16)
      reduce_parts_kernel<__half><<<blocks, kThreadsPerBlock, 0, stream>>>(
          product, blocks_of_parts, n_parts, batch, width, static_cast<__half*>(output->data), output->strides[0]);
    else
      reduce_parts_kernel<float><<<blocks, kThreadsPerBlock, 0, stream>>>(
          product, blocks_of_parts, n_parts, batch, width, static_cast<float*>(output->data), output->strides[0]);
    TF_GPU_CHECK_LAUNCH("Composite reduction");
  }

  void launch_part_gradient(const TensorView& dL_doutput, const Ctx& ctx, size_t part, int64_t batch, float* d,
                            gpuStream_t stream) const {
    const bool product = reduction() == ReductionType::Product;
    const uint32_t width = padded_output_width();
    const auto* blocks_of_parts = static_cast<const float*>(ctx.parts.data());
    const unsigned blocks = blocks_for(batch * width);
    const auto n = static_cast<uint32_t>(parts().size()), skip = static_cast<uint32_t>(part);
    if (output_dtype() == DType::F16)
      part_gradient_kernel<__half><<<blocks, kThreadsPerBlock, 0, stream>>>(product, static_cast<const __half*>(dL_doutput.data),
                                                                            dL_doutput.strides[0], blocks_of_parts, n, skip,
                                                                            batch, width, d);
    else
      part_gradient_kernel<float><<<blocks, kThreadsPerBlock, 0, stream>>>(product, static_cast<const float*>(dL_doutput.data),
                                                                           dL_doutput.strides[0], blocks_of_parts, n, skip,
                                                                           batch, width, d);
    TF_GPU_CHECK_LAUNCH("Composite part gradient");
  }
};

}  // namespace

std::unique_ptr<Encoding> make_composite_encoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims,
                                                  const EncodingBackend& backend) {
  return std::make_unique<GpuCompositeEncoding>(spec, path, n_dims, backend);
}

}  // namespace tinyfuse::cuda
