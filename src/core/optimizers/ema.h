// EMA: trains with a nested optimizer and keeps a bias-corrected exponential moving average of
// the weights it produces, which become the inference parameters. With t the nested step count
// after an update and w the weights it wrote:
//   ema_t = (ema_{t-1} * decay * (1 - decay^(t-1)) + w * (1 - decay)) / (1 - decay^t)
// i.e. the average of w_1..w_t weighted by decay^(t-k), normalised (ema_1 = w_1). The average is
// kept in FP32 whatever the param dtype (see full_precision in the report).
//
// Its host half written once: the nested optimizer, the three factors of each step (computed on
// the host in float), which weights are averaged, and the checkpoint state. A backend derives
// from EmaOptimizer<its optimizer base> and gives the average's memory and the per-element update.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/optimizers/wrapping_optimizer.h"

namespace tinyfuse {

// ema = (ema * keep + w * take) / norm.
struct EmaFactors {
  float keep, take, norm;
};

inline EmaFactors ema_factors(float decay, uint32_t t) {
  EmaFactors f;
  f.keep = decay * (1.0f - std::pow(decay, static_cast<float>(t) - 1.0f));
  f.take = 1.0f - decay;
  f.norm = 1.0f - std::pow(decay, static_cast<float>(t));
  return f;
}

template <typename Base>
class EmaOptimizer : public WrappingOptimizer<Base> {
  using WrappingOptimizer<Base>::nested_;

 public:
  EmaOptimizer(const OptimizerSpec& spec, typename WrappingOptimizer<Base>::Maker make)
      : WrappingOptimizer<Base>(spec, make) {}

  std::string name() const override { return "EMA"; }
  float learning_rate() const override { return nested_->learning_rate(); }
  void set_learning_rate(float lr) override { nested_->set_learning_rate(lr); }
  bool has_inference_params() const override { return true; }

  // What allocate_average() allocates, after the nested optimizer's state.
  void plan_memory(MemoryPlan& plan, size_t n) const override {
    nested_->plan_memory(plan, n);
    const bool on_host = this->device() == Device::CPU;
    plan.add(this->who() + " average", n, sizeof(float), on_host);
    if (nested_->has_inference_params())
      plan.add(this->who() + " copy of the nested inference weights", n, sizeof(float), on_host);
  }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    nested_->allocate(n, segments);
    allocate_average(n, nested_->has_inference_params());
    this->mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    const StepArgs args = this->begin_step(loss_scale, master, params, gradients);
    nested_->step(loss_scale, master, params, gradients);
    const uint32_t t = nested_->step_count();
    if (args.n == 0) return;
    const EmaFactors f = ema_factors(static_cast<float>(this->spec_.ema.decay), t);
    // Average what the nested optimizer would infer with: its own inference weights if it has
    // them, otherwise the weights the model computes with.
    if (nested_->has_inference_params()) {
      const TensorView source = source_view(args);
      nested_->write_inference_params(source);
      accumulate(f, source.data, DType::F32, args.stream);
    } else if (args.params) {
      accumulate(f, args.params, args.params_dtype, args.stream);
    } else {
      accumulate(f, args.master, DType::F32, args.stream);
    }
  }

  void write_inference_params(const TensorView& out) const override {
    check_weights_view(*this, "inference params", out);
    if (nested_->step_count() == 0)
      throw Error(this->who() + ": write_inference_params() before the first step(): there is no average yet");
    write_average(out);
  }

  // State: the nested optimizer's state, then the n averaged weights.
  json state_header() const override {
    return {{"otype", name()}, {"n_params", this->n_params()}, {"nested", nested_->state_header()}};
  }
  size_t state_size() const override { return nested_->state_size() + this->n_params(); }
  std::vector<float> state_data() const override {
    std::vector<float> out = nested_->state_data();
    const size_t nested_size = out.size();
    out.resize(nested_size + this->n_params());
    read_average(out.data() + nested_size);
    return out;
  }

  void check_state(const json& header, const float* data, size_t size) const override {
    this->check_header(header, size);
    const size_t nested_size = nested_->state_size();
    nested_->check_state(header_field(*this, header, "nested"), data, nested_size);
    for (size_t i = 0; i < this->n_params(); ++i)
      if (!std::isfinite(data[nested_size + i])) this->state_error("averaged weight " + std::to_string(i) + " is not finite");
  }

  void apply_state(const json& header, const float* data) override {
    const size_t nested_size = nested_->state_size();
    nested_->apply_state(header.at("nested"), data);
    load_average(data + nested_size);
  }

 protected:
  // The backend's half. The average of n weights, zeroed, and (with_source) room for n F32
  // weights that the nested optimizer's inference weights are written into.
  virtual void allocate_average(size_t n, bool with_source) = 0;
  // That room, as an F32 vector on args.stream.
  virtual TensorView source_view(const StepArgs& args) = 0;
  // ema = (ema * keep + w * take) / norm for the n weights at `weights` (of `dtype`), on `stream`.
  virtual void accumulate(const EmaFactors& f, const void* weights, DType dtype, Stream stream) = 0;
  // The average into `out` (a checked weights view), and copies of it out and in.
  virtual void write_average(const TensorView& out) const = 0;
  virtual void read_average(float* host) const = 0;
  virtual void load_average(const float* host) = 0;
};

}  // namespace tinyfuse
