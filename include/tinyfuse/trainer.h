// Trainer: owns the parameter buffers (FP32 master, the model's compute copy, gradients) and runs
// forward, loss, backward and the optimizer step, as tiny-cuda-nn's Trainer does.
#pragma once

#include <memory>
#include <vector>

#include "tinyfuse/buffer.h"
#include "tinyfuse/loss.h"
#include "tinyfuse/object.h"
#include "tinyfuse/optimizer.h"

namespace tinyfuse {

class MemoryPlan;

class Trainer {
 public:
  // Initialises the parameters from `seed` (PCG32) scaled by `param_scale`.
  Trainer(std::shared_ptr<DifferentiableObject> model, std::shared_ptr<Optimizer> optimizer,
          std::shared_ptr<Loss> loss, uint64_t seed = 1337, float param_scale = 1.0f);

  // One full step: forward, loss, backward, optimizer. Returns the mean loss over the batch
  // (this reads a value back, so it waits for the step on GPUs). A non-finite loss or non-finite
  // parameter gradients (NaN/Inf in inputs or targets) throw Error before the optimizer step:
  // parameters and optimizer state are unchanged (docs/ERRORS.md).
  float training_step(const TensorView& input, const TensorView& target,
                      const TensorView* data_pdf = nullptr);
  // The same without the read-back: the loss of the last step is available from last_loss().
  // Nothing checks the loss here: a non-finite batch reaches the optimizer.
  void training_step_async(const TensorView& input, const TensorView& target,
                           const TensorView* data_pdf = nullptr);
  float last_loss() const;

  // Forward + loss + backward only; gradients are left in gradients().
  void forward_backward(const TensorView& input, const TensorView& target,
                        const TensorView* data_pdf = nullptr);
  // The optimizer on gradients(), on the stream of the last batch (forward_backward's input).
  void optimizer_step();
  // The same on `stream`: for gradients made outside forward_backward (a loss on dL/dinput through
  // backward_backward_input), the stream they were made on; later parameter reads use it too.
  void optimizer_step(Stream stream);

  // tiny-cuda-nn's default: 128 for 16-bit parameters, 1 for FP32 and FP64.
  float loss_scale() const { return loss_scale_; }
  // Throws Error (and keeps the old scale) unless `s` is finite and > 0.
  void set_loss_scale(float s);

  // FP32 master parameters: read back to / set from the host (the compute copy is refreshed).
  // set_params_host throws ShapeError for a wrong count and Error for a non-finite value, before
  // changing anything.
  std::vector<float> params_host() const;
  void set_params_host(const std::vector<float>& params);

  TensorView params() const;
  // The FP32 master parameters themselves, on the model's device and the stream of the last batch
  // (what the optimizer updates; params() is their copy in the compute dtype).
  TensorView master_params() const;
  TensorView inference_params() const;
  TensorView gradients() const;

  DifferentiableObject& model() const { return *model_; }
  Optimizer& optimizer() const { return *optimizer_; }
  Loss& loss() const { return *loss_; }

 private:
  // Everything the trainer, model and optimizer will hold (core/memory_plan.h).
  MemoryPlan memory_plan() const;
  void refresh_compute_params();
  DType loss_value_dtype() const;
  void ensure_batch_buffers(int64_t batch, Stream stream);

  std::shared_ptr<DifferentiableObject> model_;
  std::shared_ptr<Optimizer> optimizer_;
  std::shared_ptr<Loss> loss_;
  float loss_scale_ = 1.0f;
  Buffer master_, params_, inference_params_, gradients_;
  Buffer output_, loss_values_, loss_gradients_;
  int64_t batch_capacity_ = 0;
  TensorView last_values_;
  bool has_last_loss_ = false;
  Stream stream_ = nullptr;  // where the model's last work was queued: parameter reads and writes follow it
};

}  // namespace tinyfuse
