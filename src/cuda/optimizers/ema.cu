// EMA on the GPU, with the CPU reference's semantics (cpu/optimizers/ema.cpp): trains with a
// nested optimizer and keeps a bias-corrected exponential moving average (FP32, on the device)
// of the weights it produces, which become the inference parameters. With t the nested step
// count after an update and w the weights it wrote:
//   ema_t = (ema_{t-1} * decay * (1 - decay^(t-1)) + w * (1 - decay)) / (1 - decay^t)
// The three factors are computed on the host as the CPU does; the update runs in float without
// FMA contraction.
#include <cmath>

#include "cuda/common.cuh"
#include "cuda/optimizers/gpu_optimizer.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::cuda {

namespace {

template <typename T>
__global__ void ema_accumulate_kernel(int64_t n, float keep, float take, float norm, const T* __restrict__ weights,
                                      float* __restrict__ ema) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  ema[i] = (ema[i] * keep + to_float(weights[i]) * take) / norm;
}

template <typename T>
__global__ void ema_write_kernel(int64_t n, const float* __restrict__ ema, T* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = from_float<T>(ema[i]);
}

class Ema final : public GpuOptimizer {
 public:
  explicit Ema(const OptimizerSpec& spec)
      : GpuOptimizer(spec.path), spec_(spec), nested_(make_gpu_optimizer(spec.nested.at(0))) {}

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
    plan.add(who() + " average", n, sizeof(float), false);
    if (nested_->has_inference_params()) plan.add(who() + " copy of the nested inference weights", n, sizeof(float), false);
  }

  void allocate(size_t n, const std::vector<ParamSegment>& segments) override {
    nested_->allocate(n, segments);
    ema_ = Buffer(Device::CUDA, n * sizeof(float));
    zero(ema_.data(), n * sizeof(float));
    source_ = nested_->has_inference_params() ? Buffer(Device::CUDA, n * sizeof(float)) : Buffer();
    mark_allocated(n);
  }

  void step(float loss_scale, const TensorView& master, const TensorView& params,
            const TensorView& gradients) override {
    const StepArgs args = begin_step(loss_scale, master, params, gradients);
    nested_->step(loss_scale, master, params, gradients);
    const uint32_t t = nested_->step_count();
    if (args.n == 0) return;
    // Average what the nested optimizer would infer with: its own inference weights if it has
    // them, otherwise the weights the model computes with.
    if (nested_->has_inference_params()) {
      const TensorView source = source_.vector(DType::F32, static_cast<int64_t>(args.n), args.stream);
      nested_->write_inference_params(source);
      accumulate(t, static_cast<const float*>(source.data), args.stream);
    } else if (args.params && args.params_dtype == DType::F16) {
      accumulate(t, static_cast<const __half*>(args.params), args.stream);
    } else if (args.params && args.params_dtype == DType::BF16) {
      accumulate(t, static_cast<const __nv_bfloat16*>(args.params), args.stream);
    } else {
      accumulate(t, static_cast<const float*>(args.params ? args.params : args.master), args.stream);
    }
  }

  void write_inference_params(const TensorView& out) const override {
    check_weights_view(*this, "inference params", out);
    if (nested_->step_count() == 0)
      throw Error(who() + ": write_inference_params() before the first step(): there is no average yet");
    const int64_t n = static_cast<int64_t>(n_params());
    if (n == 0) return;
    const float* ema = static_cast<const float*>(ema_.data());
    if (out.dtype == DType::F16)
      ema_write_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(out)>>>(n, ema, static_cast<__half*>(out.data));
    else if (out.dtype == DType::BF16)
      ema_write_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(out)>>>(n, ema, static_cast<__nv_bfloat16*>(out.data));
    else
      ema_write_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(out)>>>(n, ema, static_cast<float*>(out.data));
    TF_GPU_CHECK_LAUNCH("ema_write_kernel");
  }

  // State: the nested optimizer's state, then the n averaged weights.
  json state_header() const override {
    return {{"otype", name()}, {"n_params", n_params()}, {"nested", nested_->state_header()}};
  }
  size_t state_size() const override { return nested_->state_size() + n_params(); }
  std::vector<float> state_data() const override {
    std::vector<float> out = nested_->state_data();
    const size_t nested_size = out.size();
    out.resize(nested_size + n_params());
    download(out.data() + nested_size, ema_.data(), n_params() * sizeof(float));
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
    upload(ema_.data(), data + nested_size, n_params() * sizeof(float));
  }

 private:
  template <typename T>
  void accumulate(uint32_t t, const T* weights, Stream stream) {
    const float decay = static_cast<float>(spec_.ema.decay);
    const float keep = decay * (1.0f - std::pow(decay, static_cast<float>(t) - 1.0f));
    const float take = 1.0f - decay;
    const float norm = 1.0f - std::pow(decay, static_cast<float>(t));
    const int64_t n = static_cast<int64_t>(n_params());
    ema_accumulate_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(stream)>>>(
        n, keep, take, norm, weights, static_cast<float*>(ema_.data()));
    TF_GPU_CHECK_LAUNCH("ema_accumulate_kernel");
  }

  OptimizerSpec spec_;
  std::unique_ptr<GpuOptimizer> nested_;
  Buffer ema_;
  Buffer source_;  // the nested optimizer's inference weights, when it has its own
};

}  // namespace

std::unique_ptr<GpuOptimizer> make_ema(const OptimizerSpec& spec) { return std::make_unique<Ema>(spec); }

}  // namespace tinyfuse::cuda
