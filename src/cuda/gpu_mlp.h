// What the CUDA MLPs share on top of core's MlpWithParams: the device and the dtypes (parameters,
// inputs and outputs all T), and, for networks whose inference and training forward are one pass
// (run_forward, keeping what backward() needs in a context when given one), inference() and
// forward() themselves.
#pragma once

#include <memory>

#include "core/mlp_base.h"
#include "cuda/common.cuh"

namespace tinyfuse::cuda {

template <typename T>
class GpuMlp : public MlpWithParams<T> {
 public:
  using MlpWithParams<T>::MlpWithParams;

  Device device() const override { return Device::CUDA; }
  DType param_dtype() const override { return gpu_dtype_of<T>::value; }
  DType input_dtype() const override { return gpu_dtype_of<T>::value; }
  DType output_dtype() const override { return gpu_dtype_of<T>::value; }
};

// `Ctx` is the network's Context.
template <typename T, typename Ctx>
class OnePassGpuMlp : public GpuMlp<T> {
 public:
  using GpuMlp<T>::GpuMlp;

  void inference(const TensorView& input, const TensorView& output) override {
    this->check_io(input, &output);
    run_forward(input, this->inference_params_, nullptr, &output);
  }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool use_inference_params,
                                   bool /*prepare_input_gradients*/) override {
    this->check_io(input, output);
    auto ctx = std::make_unique<Ctx>();
    run_forward(input, this->weights_for(use_inference_params), ctx.get(), output);
    return ctx;
  }

 protected:
  // The pass from `input` with `weights` into `output` (may be null); with `keep`, what
  // backward() needs is kept there.
  virtual void run_forward(const TensorView& input, const T* weights, Ctx* keep, const TensorView* output) const = 0;
};

}  // namespace tinyfuse::cuda
