// tinyfuse's Trainer driven from Python (tinyfuse.tcnn.FusedTrainer): forward, loss, backward and
// optimizer as the C++ API runs them (in one kernel where the model has the one-kernel step), on
// addresses and a stream as NativeObject is called, so no PyTorch type crosses into C++.
#pragma once

#include <memory>
#include <mutex>

#include "native_object.h"
#include "tinyfuse/trainer.h"

namespace tinyfuse::python {

class NativeTrainer {
 public:
  // `model` must be an object no module calls (the trainer points it at its own parameters once);
  // loss and optimizer are built for its device.
  NativeTrainer(const NativeObject& model, const json& loss, const json& optimizer, float loss_scale);

  int64_t n_params() const;
  float loss_scale() const { return trainer_->loss_scale(); }

  // The FP32 master parameters from host memory (n_params() floats); a non-finite value is
  // refused with nothing changed.
  void set_params_host(Address host_f32);

  // One training step on a (rows x input width) input of `input_dtype` and a (rows x output
  // width) FP32 target, queued on `stream`; then the FP32 master parameters are copied to
  // `params_out` (n_params() floats on the model's device; 0: not copied). `checked`: waits for
  // the loss and refuses a non-finite loss or gradients before the optimizer (parameters and
  // optimizer state unchanged) and returns the loss; otherwise returns NaN without waiting.
  float step(Address input, DType input_dtype, Address target, int64_t rows, Address stream, Address params_out,
             bool checked);

  // The last step's loss (waits for it).
  float last_loss() const;

 private:
  Trainer& trainer() const { return *trainer_; }

  std::unique_ptr<Trainer> trainer_;
  mutable std::mutex mutex_;
};

}  // namespace tinyfuse::python
