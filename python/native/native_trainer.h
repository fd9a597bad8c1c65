// tinyfuse's Trainer driven from Python (tinyfuse.tcnn.FusedTrainer): forward, loss, backward and
// optimizer as the C++ API runs them (in one kernel where the model has the one-kernel step), on
// addresses and a stream as NativeObject is called, so no PyTorch type crosses into C++.
#pragma once

#include <memory>
#include <mutex>

#include <string>

#include "native_object.h"
#include "tinyfuse/factory.h"
#include "tinyfuse/trainer.h"

namespace tinyfuse::python {

class NativeTrainer {
 public:
  // `model` must be an object no module calls (the trainer points it at its own parameters once);
  // loss and optimizer are built for its device. `config` is what checkpoints record and compare
  // (the Python side's loss, optimizer and module configs).
  NativeTrainer(const NativeObject& model, const json& loss, const json& optimizer, float loss_scale, json config);

  int64_t n_params() const;
  float loss_scale() const { return trainer().loss_scale(); }

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

  // The FP32 master parameters copied to `dst` (n_params() floats on the model's device), on `stream`.
  void copy_params(Address dst, Address stream) const;

  // Checkpoints (tinyfuse/checkpoint.h): parameters, optimizer state and loss scale; a load checks
  // everything first (file, config, sizes) and changes nothing on an error.
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  Trainer& trainer() const { return *model_.trainer; }
  void copy_params_locked(Address dst, Stream stream) const;

  Model model_;  // loss, optimizer, object, trainer and config, as checkpoints take them
  mutable std::mutex mutex_;
};

}  // namespace tinyfuse::python
