// EMA on the GPU: the average (FP32, on the device) and its per-element update, in float without
// FMA contraction, as the CPU reference computes it (cpu/optimizers/ema.cpp);
// core/optimizers/ema.h has the host half (the three factors of each step) and the semantics.
#include "core/optimizers/ema.h"
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

class Ema final : public EmaOptimizer<GpuOptimizer> {
 public:
  explicit Ema(const OptimizerSpec& spec) : EmaOptimizer<GpuOptimizer>(spec, &make_gpu_optimizer) {}

 private:
  void allocate_average(size_t n, bool with_source) override {
    ema_ = Buffer(Device::CUDA, n * sizeof(float));
    zero(ema_.data(), n * sizeof(float));
    source_ = with_source ? Buffer(Device::CUDA, n * sizeof(float)) : Buffer();
  }

  TensorView source_view(const StepArgs& args) override {
    return source_.vector(DType::F32, static_cast<int64_t>(args.n), args.stream);
  }

  void accumulate(const EmaFactors& f, const void* weights, DType dtype, Stream stream) override {
    if (dtype == DType::F16) accumulate(f, static_cast<const __half*>(weights), stream);
    else if (dtype == DType::BF16) accumulate(f, static_cast<const __nv_bfloat16*>(weights), stream);
    else accumulate(f, static_cast<const float*>(weights), stream);
  }

  template <typename T>
  void accumulate(const EmaFactors& f, const T* weights, Stream stream) {
    const int64_t n = static_cast<int64_t>(n_params());
    ema_accumulate_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_of(stream)>>>(
        n, f.keep, f.take, f.norm, weights, static_cast<float*>(ema_.data()));
    TF_GPU_CHECK_LAUNCH("ema_accumulate_kernel");
  }

  void write_average(const TensorView& out) const override {
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

  void read_average(float* host) const override { download(host, ema_.data(), n_params() * sizeof(float)); }
  void load_average(const float* host) override { upload(ema_.data(), host, n_params() * sizeof(float)); }

  Buffer ema_;
  Buffer source_;  // the nested optimizer's inference weights, when it has its own
};

}  // namespace

std::unique_ptr<GpuOptimizer> make_ema(const OptimizerSpec& spec) { return std::make_unique<Ema>(spec); }

}  // namespace tinyfuse::cuda
