#include "core/encodings/composite_layout.h"

#include <algorithm>
#include <numeric>

namespace tinyfuse {

CompositeLayout::CompositeLayout(const CompositeSpec& spec, const std::string& path, uint32_t n_dims,
                                 const EncodingBackend& backend)
    : n_in_(n_dims), reduction_(spec.reduction) {
  for (const auto& ps : spec.parts) {
    CompositePart p;
    p.encoding = build_encoding(ps.config, ps.path, ps.n_dims, backend);
    p.paddable = dynamic_cast<PaddableEncoding*>(p.encoding.get());
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
      const uint32_t next_alignment = tinyfuse::required_output_alignment(*parts_[i + 1].encoding);
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

uint32_t CompositeLayout::padded_output_width() const {
  if (parts_.empty()) return empty_padding_;
  if (reduction_ != ReductionType::Concatenation) return parts_[0].width();
  uint32_t total = 0;
  for (const auto& p : parts_) total += p.width();
  return total;
}

uint32_t CompositeLayout::column(size_t i) const {
  uint32_t c = 0;
  for (size_t k = 0; k < i; ++k) c += parts_[k].width();
  return c;
}

void CompositeLayout::set_padded_output_width(uint32_t width) {
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

uint32_t CompositeLayout::required_output_alignment() const {
  uint32_t alignment = 1;
  for (const auto& p : parts_) alignment = std::lcm(alignment, tinyfuse::required_output_alignment(*p.encoding));
  return alignment;
}

std::vector<ParamSegment> CompositeLayout::param_segments() const {
  std::vector<ParamSegment> segs;
  for (const auto& p : parts_)
    for (ParamSegment s : p.encoding->param_segments()) {
      s.offset += p.param_offset;
      segs.push_back(s);
    }
  return segs;
}

void CompositeLayout::set_params(const TensorView& params, const TensorView& inference_params,
                                 const TensorView& gradients) {
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

void CompositeLayout::initialize_params(Pcg32& rng, float* params, float scale) {
  for (auto& p : parts_) p.encoding->initialize_params(rng, params + p.param_offset, scale);
}

json CompositeLayout::hyperparams() const {
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

// The part's width before any padding, as tiny-cuda-nn counts it.
uint32_t CompositeLayout::natural_width(CompositePart& p) {
  if (p.paddable) return p.encoding->output_width();
  p.encoding->set_alignment(1);
  return p.encoding->padded_output_width();
}

void CompositeLayout::set_part_width(CompositePart& p, uint32_t width) {
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
void CompositeLayout::find_dim_owners() {
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

}  // namespace tinyfuse
