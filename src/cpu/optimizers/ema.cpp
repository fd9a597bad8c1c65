// EMA: trains with a nested optimizer and keeps a bias-corrected exponential moving average of
// the weights it produces, which become the inference parameters. With t the nested step count
// after an update and w the weights it wrote:
//   ema_t = (ema_{t-1} * decay * (1 - decay^(t-1)) + w * (1 - decay)) / (1 - decay^t)
// i.e. the average of w_1..w_t weighted by decay^(t-k), normalised (ema_1 = w_1).
// The average is kept in FP32 whatever the param dtype (see full_precision in the report).
#include <cmath>
#include <type_traits>

#include "cpu/optimizers/cpu_optimizer.h"
#include "cpu/parallel.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cpu {

namespace {

class Ema final : public CpuOptimizer {
 public:
  explicit Ema(const OptimizerSpec& spec)
      : CpuOptimizer(spec.path), spec_(spec), nested_(make_cpu_optimizer(spec.nested.at(0))) {}

  std::string name() const override { return "EMA"; }
  float learning_rate() const override { return nested_->learning_rate(); }
  void set_learning_rate(float lr) override { nested_->set_learning_rate(lr); }
  uint32_t step_count() const override { return nested_->step_count(); }
  bool has_inference_params() const override { return true; }

  json hyperparams() const override {
    json j = optimizer_spec_json(spec_);
    j["nested"] = nested_->hyperparams();
    return j;
  }

  void plan_memory(MemoryPlan& plan, size_t n) const override {
    nested_->plan_memory(plan, n);
    plan.add(who() + " average", n, sizeof(float), true);
    if (nested_->has_inference_params()) plan.add(who() + " copy of the nested inference weights", n, sizeof(float), true);
  }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    nested_->allocate(n, segments);
    ema_.assign(n, 0.0f);
    source_.assign(nested_->has_inference_params() ? n : 0, 0.0f);
    mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    if (!allocated()) throw Error(who() + ": step() called before allocate()");
    const StepArgs args = check_step_args(*this, loss_scale, master, params, gradients);
    nested_->step(loss_scale, master, params, gradients);
    const uint32_t t = nested_->step_count();
    // Average what the nested optimizer would infer with: its own inference weights if it has
    // them, otherwise the weights the model computes with.
    if (nested_->has_inference_params()) {
      nested_->write_inference_params(TensorView::vector(source_.data(), static_cast<int64_t>(source_.size())));
      accumulate(t, source_.data());
    } else if (args.params) {
      with_step_types(args, [&](auto* p, const auto*) { accumulate(t, static_cast<const std::remove_pointer_t<decltype(p)>*>(p)); });
    } else {
      accumulate(t, static_cast<const float*>(args.master));
    }
  }

  void write_inference_params(const TensorView& out) const override {
    check_output_view(*this, "inference params", out);
    if (nested_->step_count() == 0)
      throw Error(who() + ": write_inference_params() before the first step(): there is no average yet");
    const int64_t n = static_cast<int64_t>(n_params());
    parallel_for(n, kOptimizerGrain, [&](int64_t b, int64_t e) {
      if (out.dtype == DType::F64) {
        double* o = static_cast<double*>(out.data);
        for (int64_t i = b; i < e; ++i) o[i] = ema_[i];
      } else {
        float* o = static_cast<float*>(out.data);
        for (int64_t i = b; i < e; ++i) o[i] = ema_[i];
      }
    });
  }

  // State: the nested optimizer's state, then the n averaged weights.
  json state_header() const override {
    return {{"otype", name()}, {"n_params", n_params()}, {"nested", nested_->state_header()}};
  }
  size_t state_size() const override { return nested_->state_size() + n_params(); }
  std::vector<float> state_data() const override {
    std::vector<float> out = nested_->state_data();
    out.insert(out.end(), ema_.begin(), ema_.end());
    return out;
  }

  void check_state(const json& header, const float* data, size_t size) const override {
    check_header(header, size);
    const size_t nested_size = nested_->state_size();
    nested_->check_state(header_field(*this, header, "nested"), data, nested_size);
    for (size_t i = 0; i < n_params(); ++i)
      if (!std::isfinite(data[nested_size + i])) state_error("averaged weight " + std::to_string(i) + " is not finite");
  }

  void apply_state(const json& header, const float* data) override {
    const size_t nested_size = nested_->state_size();
    nested_->apply_state(header.at("nested"), data);
    std::copy(data + nested_size, data + nested_size + n_params(), ema_.begin());
  }

 private:
  template <typename T>
  void accumulate(uint32_t t, const T* weights) {
    const float decay = static_cast<float>(spec_.ema.decay);
    const float keep = decay * (1.0f - std::pow(decay, static_cast<float>(t) - 1.0f));
    const float take = 1.0f - decay;
    const float norm = 1.0f - std::pow(decay, static_cast<float>(t));
    parallel_for(static_cast<int64_t>(n_params()), kOptimizerGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ema_[i] = (ema_[i] * keep + static_cast<float>(weights[i]) * take) / norm;
    });
  }

  OptimizerSpec spec_;
  std::unique_ptr<CpuOptimizer> nested_;
  std::vector<float> ema_;
  std::vector<float> source_;  // the nested optimizer's inference weights, when it has its own
};

}  // namespace

std::unique_ptr<CpuOptimizer> make_ema(const OptimizerSpec& spec) { return std::make_unique<Ema>(spec); }

}  // namespace tinyfuse::cpu
