// tiny-cuda-nn's object model: a differentiable function of an input batch and a flat parameter
// buffer, with forward state kept in a Context between forward() and backward().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "tinyfuse/common.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/random.h"
#include "tinyfuse/tensor.h"

namespace tinyfuse {

using json = nlohmann::json;

class Loss;

// Forward state a backward() needs (activations, ...). Each object subclasses it.
struct Context {
  virtual ~Context() = default;
};

// Where a run of parameters sits in the flat buffer and what it is. Optimizers use this
// (e.g. Adam's non_matrix_learning_rate_factor; l2_reg applies to matrices only).
struct ParamSegment {
  enum class Kind { Matrix, Vector, Grid };
  size_t offset = 0;
  size_t count = 0;
  Kind kind = Kind::Matrix;
  uint32_t fan_out = 0, fan_in = 0;  // for matrices
};

class DifferentiableObject {
 public:
  virtual ~DifferentiableObject() = default;

  virtual Device device() const = 0;
  // dtype of the parameters the object computes with (the optimizer keeps an FP32 master copy).
  virtual DType param_dtype() const = 0;
  // dtype of inputs it accepts and outputs it writes.
  virtual DType input_dtype() const = 0;
  virtual DType output_dtype() const = 0;

  virtual uint32_t input_width() const = 0;
  virtual uint32_t padded_output_width() const = 0;
  virtual uint32_t output_width() const = 0;

  // Inputs must have a multiple of this many rows (fused GPU kernels work on whole row tiles);
  // callers pad the batch and ignore the padded rows' outputs.
  virtual uint32_t batch_granularity() const { return 1; }

  virtual size_t n_params() const = 0;
  virtual std::vector<ParamSegment> param_segments() const = 0;

  // Points the object at caller-owned buffers of n_params() elements of param_dtype() on device().
  // `inference_params` may equal `params`; `gradients` may be empty if no backward() is run.
  virtual void set_params(const TensorView& params, const TensorView& inference_params,
                          const TensorView& gradients) = 0;
  // Writes initial values into a host FP32 buffer of n_params() elements.
  virtual void initialize_params(Pcg32& rng, float* params_host, float scale = 1.0f) = 0;

  // Output from the inference parameters; no state is kept.
  virtual void inference(const TensorView& input, const TensorView& output) = 0;
  // `output` may be null when only the context is wanted.
  virtual std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output,
                                           bool use_inference_params = false,
                                           bool prepare_input_gradients = false) = 0;
  // `dL_dinput` may be null when input gradients are not needed.
  virtual void backward(const Context& ctx, const TensorView& input, const TensorView& output,
                        const TensorView& dL_doutput, const TensorView* dL_dinput,
                        bool use_inference_params = false,
                        GradientMode param_gradients_mode = GradientMode::Overwrite) = 0;

  // A training forward with `loss` evaluated on its output (the Trainer's step): the context, and
  // `values` / `gradients` as loss.evaluate(loss_scale, output, target, values, gradients,
  // data_pdf) writes them. By default forward() into `output`, then the loss. An object that can
  // evaluate the loss while its output is still on chip does so instead (FullyFusedMLP on sm_90,
  // up to 64 wide, for the built-in L2 loss: the same bits) and may leave `output` unwritten;
  // its backward() then does not read `output`.
  virtual std::unique_ptr<Context> forward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss,
                                                     float loss_scale, const TensorView& target, const TensorView& values,
                                                     const TensorView& gradients, const TensorView* data_pdf = nullptr);

  // The Trainer's whole pass: forward_with_loss, then backward() of `gradients` into the parameter
  // gradients (param_gradients_mode) and, where `dL_dinput` is given, the input gradients, which
  // by default is exactly what it does. An object that can run both in one kernel does so instead
  // (FullyFusedMLP on sm_90 for the shapes of pipelined/train_step.cu: L2, RelativeL2 or L1, 64 wide,
  // ReLU, ...): `values`, the parameter gradients and `dL_dinput` are then written as the two calls
  // write them, but `output` and `gradients` (the loss gradients) may be left unwritten, being
  // scratch to it. (NetworkWithInputEncoding asks its network for dL_dinput to train its encoding.)
  virtual void forward_backward_with_loss(const TensorView& input, const TensorView& output, const Loss& loss,
                                          float loss_scale, const TensorView& target, const TensorView& values,
                                          const TensorView& gradients, const TensorView* data_pdf,
                                          GradientMode param_gradients_mode, const TensorView* dL_dinput = nullptr);

  // Second derivatives through the input gradients (tiny-cuda-nn's backward_backward_input), for
  // losses that depend on dL/dinput (an eikonal term, say). backward() computed
  // dL_dinput = J(input)^T dL_doutput; given dL2/d(dL_dinput) (`dL_ddLdinput`, (batch, input_width)),
  // this writes or adds (per `param_gradients_mode`) dL2/dparams into the gradient buffer,
  // writes dL2/d(dL_doutput) into `dL_ddLdoutput` ((batch, padded_output_width); may be null) and
  // dL2/dinput through the input Hessian into `dL_dinput` ((batch, input_width); may be null).
  // `dL_doutput` is the upstream gradient the backward() saw; the context is forward()'s (made
  // with prepare_input_gradients). On the CPU every network and encoding has second derivatives,
  // on CUDA all but the inference-only Width64FusedMLP and a Composite's Product reduction
  // (docs/ARCHITECTURE.md, "Second derivatives"). Objects without them throw UnsupportedError
  // before writing anything.
  virtual void backward_backward_input(const Context& /*ctx*/, const TensorView& /*input*/,
                                       const TensorView& /*dL_ddLdinput*/, const TensorView& /*dL_doutput*/,
                                       const TensorView* /*dL_ddLdoutput*/, const TensorView* /*dL_dinput*/,
                                       bool /*use_inference_params*/ = false,
                                       GradientMode /*param_gradients_mode*/ = GradientMode::Overwrite) {
    throw UnsupportedError(name() + "::backward_backward_input: no second derivatives for this object on " +
                           to_string(device()) + "; on the CPU every network and encoding has them, on CUDA every one "
                           "but the inference-only Width64FusedMLP");
  }

  virtual json hyperparams() const = 0;
  virtual std::string name() const = 0;
};

}  // namespace tinyfuse
