// Composite: splits the flat parameter buffer into contiguous ranges, in array order, of
// n_params_to_optimize each, and lets one nested optimizer own each range (with the parameter
// segments that fall into it, rebased to the range's start). Its learning rate is a factor on
// the nested optimizers' initial rates; its step count is the first nested optimizer's.
//
// Device-neutral: it only slices views and talks to the nested optimizers. `Base` is the
// backend's optimizer base (derived from OptimizerBase, giving device()); `make` builds the
// nested optimizers.
#pragma once

#include <cfloat>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/optimizers/optimizer_base.h"

namespace tinyfuse {

template <typename Base>
class CompositeOptimizer final : public Base {
 public:
  using Maker = std::unique_ptr<Base> (*)(const OptimizerSpec&);

  CompositeOptimizer(const OptimizerSpec& spec, Maker make) : Base(spec.path), spec_(spec) {
    size_t offset = 0;
    for (const auto& s : spec.nested) {
      nested_.push_back(make(s));
      initial_lrs_.push_back(nested_.back()->learning_rate());
      offsets_.push_back(offset);
      counts_.push_back(s.n_params_to_optimize);
      offset += s.n_params_to_optimize;
    }
  }

  std::string name() const override { return "Composite"; }
  float learning_rate() const override { return factor_; }
  void set_learning_rate(float factor) override {
    this->check_learning_rate(factor);
    for (size_t k = 0; k < nested_.size(); ++k) {
      const float lr = initial_lrs_[k] * factor;
      if (!std::isfinite(lr))
        throw Error(this->who() + ": set_learning_rate(" + std::to_string(factor) + ") would give nested optimizer " +
                    std::to_string(k) + " a learning rate of " + std::to_string(lr) + "; nothing was changed");
    }
    for (size_t k = 0; k < nested_.size(); ++k) nested_[k]->set_learning_rate(initial_lrs_[k] * factor);
    factor_ = factor;
  }
  uint32_t step_count() const override { return nested_.front()->step_count(); }
  bool has_inference_params() const override {
    for (const auto& o : nested_)
      if (o->has_inference_params()) return true;
    return false;
  }

  json hyperparams() const override {
    json list = json::array();
    for (size_t k = 0; k < nested_.size(); ++k) {
      json h = nested_[k]->hyperparams();
      h["n_params_to_optimize"] = counts_[k];
      list.push_back(std::move(h));
    }
    return {{"otype", name()}, {"nested", std::move(list)}};
  }

  void plan_memory(MemoryPlan& plan, size_t n) const override {
    for (size_t k = 0; k < nested_.size(); ++k) nested_[k]->plan_memory(plan, counts_[k]);
    if (has_inference_params())
      plan.add(this->who() + " inference weights", n, widest_weight_dtype_size(this->device()), this->device() == Device::CPU);
  }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    const size_t total = std::accumulate(counts_.begin(), counts_.end(), size_t(0));
    if (total != n) {
      std::string parts;
      for (size_t k = 0; k < counts_.size(); ++k) parts += (k ? " + " : "") + std::to_string(counts_[k]);
      throw ConfigError(this->path_ + ".nested", parts + " = " + std::to_string(total),
                        "the nested optimizers' n_params_to_optimize must add up to the model's parameter count, " +
                            std::to_string(n),
                        "n_params_to_optimize values summing to " + std::to_string(n) +
                            " (ranges are taken in array order from the start of the parameter buffer)");
    }
    (void)param_runs(*this, n, segments);  // reject segments that do not fit before slicing them
    for (size_t k = 0; k < nested_.size(); ++k)
      nested_[k]->allocate(counts_[k], slice_segments(segments, offsets_[k], counts_[k]));
    plain_ = has_inference_params() ? Buffer(this->device(), n * widest_weight_dtype_size(this->device())) : Buffer();
    plain_valid_ = false;
    this->mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    if (!this->allocated()) throw Error(this->who() + ": step() called before allocate()");
    check_step_views(*this, loss_scale, master, params, gradients);
    for (size_t k = 0; k < nested_.size(); ++k) {
      auto slice = [&](const TensorView& v) { return sub_vector(v, offsets_[k], counts_[k]); };
      nested_[k]->step(loss_scale, slice(master), slice(params), slice(gradients));
    }
    if (plain_.data()) {
      // Inference weights of the ranges whose optimizer has none of its own: the trained ones,
      // kept as the model computes with them (params = the rounded master weights).
      plain_dtype_ = params.dtype;
      const TensorView plain = plain_view(master.stream);
      for (size_t k = 0; k < nested_.size(); ++k) {
        if (nested_[k]->has_inference_params()) continue;
        copy_weights(sub_vector(plain, offsets_[k], counts_[k]), sub_vector(params, offsets_[k], counts_[k]));
      }
      plain_valid_ = true;
    }
  }

  void write_inference_params(const TensorView& out) const override {
    if (!has_inference_params()) return;
    check_weights_view(*this, "inference params", out);
    if (!plain_valid_)
      throw Error(this->who() + ": write_inference_params() before the first step() since allocate() or load_state()");
    const TensorView plain = plain_view(out.stream);
    for (size_t k = 0; k < nested_.size(); ++k) {
      const TensorView part = sub_vector(out, offsets_[k], counts_[k]);
      if (nested_[k]->has_inference_params())
        nested_[k]->write_inference_params(part);
      else
        copy_weights(part, sub_vector(plain, offsets_[k], counts_[k]));
    }
  }

  // State: the factor in the header, then each nested optimizer's state in order.
  json state_header() const override {
    json list = json::array();
    for (const auto& o : nested_) list.push_back(o->state_header());
    return {{"otype", name()},
            {"n_params", this->n_params()},
            {"learning_rate_factor", factor_},
            {"nested", std::move(list)}};
  }
  size_t state_size() const override {
    size_t s = 0;
    for (const auto& o : nested_) s += o->state_size();
    return s;
  }
  std::vector<float> state_data() const override {
    std::vector<float> out;
    out.reserve(state_size());
    for (const auto& o : nested_) {
      std::vector<float> part = o->state_data();
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }

  void check_state(const json& header, const float* data, size_t size) const override {
    this->check_header(header, size);
    const double factor = header_number(*this, header, "learning_rate_factor");
    if (factor < 0 || factor > FLT_MAX)
      this->state_error("learning_rate_factor " + std::to_string(factor) + " is not a float >= 0");
    const json& list = header_field(*this, header, "nested");
    if (!list.is_array() || list.size() != nested_.size())
      this->state_error("\"nested\" must be an array of " + std::to_string(nested_.size()) + " nested optimizer states");
    for (size_t k = 0; k < nested_.size(); ++k) {
      nested_[k]->check_state(list[k], data, nested_[k]->state_size());
      data += nested_[k]->state_size();
    }
  }

  void apply_state(const json& header, const float* data) override {
    factor_ = static_cast<float>(header.at("learning_rate_factor").get<double>());
    for (size_t k = 0; k < nested_.size(); ++k) {
      nested_[k]->apply_state(header.at("nested")[k], data);
      data += nested_[k]->state_size();
    }
    plain_valid_ = false;
  }

 private:
  TensorView plain_view(Stream stream) const {
    return plain_.vector(plain_dtype_, static_cast<int64_t>(this->n_params()), stream);
  }

  OptimizerSpec spec_;
  std::vector<std::unique_ptr<Base>> nested_;
  std::vector<float> initial_lrs_;
  std::vector<size_t> offsets_, counts_;
  float factor_ = 1.0f;
  // The trained weights of the ranges without inference weights of their own (see step()), in
  // plain_dtype_; only when some nested optimizer has inference weights.
  Buffer plain_;
  DType plain_dtype_ = DType::F32;
  bool plain_valid_ = false;
};

}  // namespace tinyfuse
