// What the CUDA MLPs share on top of core's MlpWithParams: the device and the dtypes (parameters,
// inputs and outputs all T), and, for networks whose inference and training forward are one pass
// (run_forward, keeping what backward() needs in a context when given one), inference() and
// forward() themselves.
#pragma once

#include <memory>

#include "core/mlp_base.h"
#include "cuda/common.cuh"
#include "cuda/mlp_second_order.h"

namespace tinyfuse::cuda {

template <typename T>
class GpuMlp : public MlpWithParams<T> {
 public:
  using MlpWithParams<T>::MlpWithParams;

  Device device() const override { return Device::CUDA; }
  DType param_dtype() const override { return gpu_dtype_of<T>::value; }
  DType input_dtype() const override { return gpu_dtype_of<T>::value; }
  DType output_dtype() const override { return gpu_dtype_of<T>::value; }

 protected:
  // backward_backward_input for a network whose forward keeps FP16 or fused state (Ctx, with its
  // batch): the call checked, then an FP32 forward recomputed from the parameters and the shared
  // sweeps (mlp_second_order.h).
  template <typename Ctx>
  void recomputed_backward_backward_input(const Context& base_ctx, const TensorView& input,
                                          const TensorView& dL_ddLdinput, const TensorView& dL_doutput,
                                          const TensorView* dL_ddLdoutput, const TensorView* dL_dinput,
                                          bool use_inference_params, GradientMode mode) {
    const auto* ctx = dynamic_cast<const Ctx*>(&base_ctx);
    if (!ctx)
      throw Error(this->name() + "::backward_backward_input: context does not come from this network's forward()");
    this->check_backward_backward(input, dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, mode,
                                  [&](int64_t rows) { return ctx->batch == rows; });
    const MlpSpec& spec = this->spec_;
    recomputed_second_order(SecondOrderShape{this->layers_, spec.biases, spec.activation, spec.output_activation},
                            this->n_params_, this->weights_for(use_inference_params), this->gradients_, input,
                            dL_ddLdinput, dL_doutput, dL_ddLdoutput, dL_dinput, mode);
  }
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
