// Composite on CUDA. Concatenation: every part reads its column slice of the input and writes its
// column slice of the composite's output in place (strided views, the composite's dtype), and in
// backward reads its slice of dL_doutput the same way: no copies. Sum / Product: the parts write
// F32 scratch blocks that one kernel reduces into the output (Product's backward needs them
// again: they stay in the context); in backward each part of an F32 Sum reads dL_doutput itself,
// other cases get their F32 dL/d(part) from one kernel. Input gradients: a part whose dims no other part reads writes
// its columns of dL_dinput in place; parts sharing dims add theirs in (so shared dims get the sum,
// as on the CPU), and dims read by no part are 0.
#include "cuda/encodings/composite.h"

#include <algorithm>
#include <numeric>

#include "core/encodings/composite_config.h"
#include "cuda/common.cuh"
#include "cuda/encodings/make_encoding.h"
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

TensorView on_stream(TensorView v, Stream s) {
  v.stream = s;
  return v;
}

// Layout as in tiny-cuda-nn and the CPU backend (see src/cpu/encodings/composite.cpp):
//  * Concatenation: part i's features start where part i-1's padded features end; part i is
//    padded so that part i+1 starts at a multiple of its required output alignment; the
//    composite's own padding goes to the last part.
//  * Sum / Product: every part is padded to the same width; output column j combines the parts'
//    column j, padding included.
// Parts that are not GpuEncodings (grids) only have set_alignment(); such a part is padded to w
// columns with set_alignment(w) when that gives w, else the composite writes the missing columns
// itself, as ones after the part's output.
class GpuCompositeEncoding final : public GpuEncoding {
 public:
  GpuCompositeEncoding(const CompositeSpec& spec, const std::string& path, uint32_t n_dims)
      : n_in_(n_dims), reduction_(spec.reduction) {
    for (const auto& ps : spec.parts) {
      Part p;
      p.encoding = make_encoding(ps.config, ps.path, ps.n_dims);
      p.paddable = dynamic_cast<GpuEncoding*>(p.encoding.get());
      p.begin = ps.begin;
      p.n_dims = ps.n_dims;
      p.param_offset = n_params_;
      n_params_ += p.encoding->n_params();
      parts_.push_back(std::move(p));
    }
    find_dim_owners();
    if (parts_.empty()) return;

    std::vector<uint32_t> natural(parts_.size());
    for (size_t i = 0; i < parts_.size(); ++i) natural[i] = natural_width(parts_[i]);
    if (reduction_ == ReductionType::Concatenation) {
      uint32_t so_far = 0;
      for (size_t i = 0; i + 1 < parts_.size(); ++i) {
        const uint32_t next_alignment = cuda::required_output_alignment(*parts_[i + 1].encoding);
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

  uint32_t input_width() const override { return n_in_; }
  uint32_t output_width() const override { return natural_width_; }
  uint32_t padded_output_width() const override {
    if (parts_.empty()) return empty_padding_;
    if (reduction_ != ReductionType::Concatenation) return parts_[0].width();
    uint32_t total = 0;
    for (const auto& p : parts_) total += p.width();
    return total;
  }

  // Concatenated parts write the composite's dtype themselves; reduced parts stay F32 (the
  // reduction rounds once).
  void set_output_dtype(DType dtype) override {
    GpuEncoding::set_output_dtype(dtype);
    if (reduction_ == ReductionType::Concatenation)
      for (auto& p : parts_) p.encoding->set_output_dtype(dtype);
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
    for (const auto& p : parts_) alignment = std::lcm(alignment, cuda::required_output_alignment(*p.encoding));
    return alignment;
  }

  // The parts' parameter dtype (they share the composite's slice of one buffer).
  DType param_dtype() const override {
    for (const auto& p : parts_)
      if (p.encoding->n_params() > 0) return p.encoding->param_dtype();
    return DType::F32;
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
    if (!ctx || ctx->nested.size() != parts_.size())
      throw Error("Composite::backward: context does not come from this encoding's forward()");
    check_input(input);
    const int64_t batch = input.rows();
    if (ctx->batch != batch)
      throw ShapeError("Composite::backward: input batch differs from the forward() that made the context");
    check_features(dL_doutput, "dL_doutput", batch);
    if (dL_dinput) check_input_gradient(*dL_dinput, batch);
    const Stream s = input.stream;
    const gpuStream_t stream = stream_of(input);
    if (dL_dinput && !all_dims_owned_ && batch > 0) fill_tensor(on_stream(*dL_dinput, s), 0.0);

    const bool reduced = reduction_ != ReductionType::Concatenation;
    const uint32_t width = padded_output_width();
    Buffer d_part, d_in;  // reductions: a part's dL/d(its output); shared dims: a part's input gradients
    if (reduced && !(reduction_ == ReductionType::Sum && output_dtype() == DType::F32))
      d_part = Buffer::on_stream(Device::CUDA, static_cast<size_t>(batch) * width * sizeof(float), s);
    if (dL_dinput) d_in = Buffer::on_stream(Device::CUDA, static_cast<size_t>(batch) * max_shared_dims_ * sizeof(float), s);

    uint32_t column = 0;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      const uint32_t part_column = column;
      column += p.width();
      const bool wants_params = p.encoding->n_params() > 0 && mode != GradientMode::Ignore;
      if (!wants_params && !dL_dinput) continue;

      const uint32_t pw = p.encoding->padded_output_width();
      TensorView d_out, out;
      if (!reduced) {
        d_out = on_stream(dL_doutput.cols_slice(part_column, pw), s);
        if (output.data) out = on_stream(output.cols_slice(part_column, pw), s);
      } else {
        if (reduction_ == ReductionType::Sum && output_dtype() == DType::F32) {
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

 private:
  struct Part {
    std::unique_ptr<Encoding> encoding;
    GpuEncoding* paddable = nullptr;  // null: set_alignment() only (see above)
    uint32_t begin = 0, n_dims = 0;
    uint32_t extra_padding = 0;  // ones the composite writes after the part's own padded output
    size_t param_offset = 0;
    bool owns_dims = true;  // no other part reads any of its dims
    uint32_t width() const { return encoding->padded_output_width() + extra_padding; }
  };

  struct Ctx : Context {
    std::vector<std::unique_ptr<Context>> nested;
    Buffer parts;  // reductions: every part's (batch, width) F32 output, one block after another
    int64_t batch = 0;
  };

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

  // Which parts read dims no other part reads, and whether every dim has exactly one reader.
  void find_dim_owners() {
    std::vector<uint32_t> readers(n_in_, 0);
    for (const auto& p : parts_)
      for (uint32_t d = p.begin; d < p.begin + p.n_dims; ++d) ++readers[d];
    all_dims_owned_ = std::all_of(readers.begin(), readers.end(), [](uint32_t n) { return n == 1; });
    for (auto& p : parts_) {
      p.owns_dims = std::all_of(readers.begin() + p.begin, readers.begin() + p.begin + p.n_dims,
                                [](uint32_t n) { return n == 1; });
      if (!p.owns_dims) max_shared_dims_ = std::max(max_shared_dims_, p.n_dims);
    }
  }

  static TensorView part_input(const TensorView& input, const Part& p) { return input.cols_slice(p.begin, p.n_dims); }

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
    c.nested.resize(parts_.size());
    if (parts_.empty()) {
      if (output && batch > 0 && output->cols() > 0) fill_tensor(on_stream(*output, s), 1.0);
      return;
    }
    auto encode = [&](size_t i, const TensorView* out) {
      Part& p = parts_[i];
      if (ctx) c.nested[i] = p.encoding->forward(part_input(input, p), out, use_inference_params, prepare_input_gradients);
      else p.encoding->inference(part_input(input, p), *out);
    };
    if (reduction_ == ReductionType::Concatenation) {
      uint32_t column = 0;
      for (size_t i = 0; i < parts_.size(); ++i) {
        const Part& p = parts_[i];
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
    c.parts = Buffer::on_stream(Device::CUDA, parts_.size() * static_cast<size_t>(batch) * width * sizeof(float), s);
    for (size_t i = 0; i < parts_.size(); ++i) {
      const Part& p = parts_[i];
      const uint32_t pw = p.encoding->padded_output_width();
      const TensorView block = part_block(c, i, batch, s);
      const TensorView out = block.cols_slice(0, pw);
      encode(i, &out);
      if (p.extra_padding > 0 && batch > 0) fill_tensor(block.cols_slice(pw, p.extra_padding), 1.0);
    }
    if (!output || batch == 0 || width == 0) return;
    const bool product = reduction_ == ReductionType::Product;
    const auto* parts = static_cast<const float*>(c.parts.data());
    const unsigned blocks = blocks_for(batch * width);
    const gpuStream_t stream = stream_of(input);
    if (output_dtype() == DType::F16)
      reduce_parts_kernel<__half><<<blocks, kThreadsPerBlock, 0, stream>>>(
          product, parts, static_cast<uint32_t>(parts_.size()), batch, width, static_cast<__half*>(output->data),
          output->strides[0]);
    else
      reduce_parts_kernel<float><<<blocks, kThreadsPerBlock, 0, stream>>>(
          product, parts, static_cast<uint32_t>(parts_.size()), batch, width, static_cast<float*>(output->data),
          output->strides[0]);
    TF_GPU_CHECK_LAUNCH("Composite reduction");
  }

  void launch_part_gradient(const TensorView& dL_doutput, const Ctx& ctx, size_t part, int64_t batch, float* d,
                            gpuStream_t stream) const {
    const bool product = reduction_ == ReductionType::Product;
    const uint32_t width = padded_output_width();
    const auto* parts = static_cast<const float*>(ctx.parts.data());
    const unsigned blocks = blocks_for(batch * width);
    const auto n = static_cast<uint32_t>(parts_.size()), skip = static_cast<uint32_t>(part);
    if (output_dtype() == DType::F16)
      part_gradient_kernel<__half><<<blocks, kThreadsPerBlock, 0, stream>>>(
          product, static_cast<const __half*>(dL_doutput.data), dL_doutput.strides[0], parts, n, skip, batch, width, d);
    else
      part_gradient_kernel<float><<<blocks, kThreadsPerBlock, 0, stream>>>(
          product, static_cast<const float*>(dL_doutput.data), dL_doutput.strides[0], parts, n, skip, batch, width, d);
    TF_GPU_CHECK_LAUNCH("Composite part gradient");
  }

  uint32_t n_in_;
  ReductionType reduction_;
  std::vector<Part> parts_;
  size_t n_params_ = 0;
  uint32_t natural_width_ = 0;
  uint32_t empty_padding_ = 0;  // width when no part encodes anything
  bool all_dims_owned_ = true;
  uint32_t max_shared_dims_ = 0;
};

}  // namespace

std::unique_ptr<GpuEncoding> make_composite_encoding(const json& config, const std::string& path, uint32_t n_dims) {
  const CompositeSpec spec = parse_composite_config(config, path, n_dims);
  return std::make_unique<GpuCompositeEncoding>(spec, path, n_dims);
}

std::unique_ptr<GpuEncoding> make_nrc_encoding(const json& config, const std::string& path, uint32_t n_dims) {
  const NrcSpec nrc = parse_nrc_config(config, path, n_dims);
  const CompositeSpec spec = parse_composite_config(nrc_composite_config(nrc), path, n_dims);
  return std::make_unique<GpuCompositeEncoding>(spec, path, n_dims);
}

}  // namespace tinyfuse::cuda
