// Plain SGD with tiny-cuda-nn's semantics: every parameter (matrix or not, zero gradient or not)
// takes w -= learning_rate * (g + l2_reg * w). Arithmetic in float, as on the GPU.
#include <cfloat>
#include <cmath>
#include <type_traits>

#include "cpu/optimizers/cpu_optimizer.h"
#include "cpu/parallel.h"
#include "tinyfuse/errors.h"

namespace tinyfuse::cpu {

namespace {

class Sgd final : public CpuOptimizer {
 public:
  explicit Sgd(const OptimizerSpec& spec)
      : CpuOptimizer(spec.path), spec_(spec), lr_(static_cast<float>(spec.sgd.learning_rate)) {}

  std::string name() const override { return "SGD"; }
  float learning_rate() const override { return lr_; }
  void set_learning_rate(float lr) override {
    check_learning_rate(lr);
    lr_ = lr;
  }
  uint32_t step_count() const override { return step_; }

  json hyperparams() const override {
    json j = optimizer_spec_json(spec_);
    j["learning_rate"] = tidy_float(lr_);
    return j;
  }

  void plan_memory(MemoryPlan&, size_t) const override {}  // no state

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    (void)param_runs(*this, n, segments);  // only to reject segments that do not fit
    step_ = 0;
    mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    if (!allocated()) throw Error(who() + ": step() called before allocate()");
    const StepArgs args = check_step_args(*this, loss_scale, master, params, gradients);
    ++step_;
    const float lr = lr_, l2 = static_cast<float>(spec_.sgd.l2_reg);
    with_step_types(args, [&](auto* p, const auto* g) {
      using P = std::remove_pointer_t<decltype(p)>;
      float* w = args.master;
      parallel_for(static_cast<int64_t>(args.n), kOptimizerGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const float grad = static_cast<float>(g[i]) / loss_scale + l2 * w[i];
          const float new_w = w[i] - lr * grad;
          w[i] = new_w;
          if (p) p[i] = static_cast<P>(new_w);
        }
      });
    });
  }

  // State: the step counter and learning rate (in the header); no per-parameter data.
  json state_header() const override {
    return {{"otype", name()}, {"n_params", n_params()}, {"current_step", step_}, {"learning_rate", tidy_float(lr_)}};
  }
  size_t state_size() const override { return 0; }
  std::vector<float> state_data() const override { return {}; }

  void check_state(const json& header, const float*, size_t size) const override {
    check_header(header, size);
    if (header_uint(*this, header, "current_step") > UINT32_MAX) state_error("current_step does not fit 32 bits");
    const double lr = header_number(*this, header, "learning_rate");
    if (lr < 0 || lr > FLT_MAX) state_error("learning_rate " + std::to_string(lr) + " is not a float >= 0");
  }

  void apply_state(const json& header, const float*) override {
    step_ = static_cast<uint32_t>(header.at("current_step").get<uint64_t>());
    lr_ = static_cast<float>(header.at("learning_rate").get<double>());
  }

 private:
  OptimizerSpec spec_;
  float lr_;
  uint32_t step_ = 0;
};

}  // namespace

std::unique_ptr<CpuOptimizer> make_sgd(const OptimizerSpec& spec) { return std::make_unique<Sgd>(spec); }

}  // namespace tinyfuse::cpu
