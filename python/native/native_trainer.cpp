#include "native_trainer.h"

#include <cmath>
#include <limits>
#include <vector>

#include "tinyfuse/buffer.h"
#include "tinyfuse/checkpoint.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/factory.h"

namespace tinyfuse::python {

namespace {

void* as_pointer(Address a) { return reinterpret_cast<void*>(a); }

BuildOptions options_for(const DifferentiableObject& model) {
  BuildOptions o;
  o.device = model.device();
  o.cpu_precision = model.param_dtype() == DType::F64 ? DType::F64 : DType::F32;
  return o;
}

}  // namespace

NativeTrainer::NativeTrainer(const NativeObject& model, const json& loss, const json& optimizer, float loss_scale,
                             json config) {
  const BuildOptions o = options_for(model.object());
  model_.loss = create_loss(loss, o);
  model_.optimizer = create_optimizer(optimizer, o);
  model_.network = model.shared_object();
  model_.trainer = std::make_shared<Trainer>(model_.network, model_.optimizer, model_.loss);
  model_.trainer->set_loss_scale(loss_scale);
  model_.config = std::move(config);
}

int64_t NativeTrainer::n_params() const { return static_cast<int64_t>(trainer().model().n_params()); }

void NativeTrainer::set_params_host(Address host_f32) {
  std::vector<float> values(static_cast<size_t>(n_params()));
  if (!values.empty()) std::copy_n(static_cast<const float*>(as_pointer(host_f32)), values.size(), values.data());
  std::lock_guard<std::mutex> lock(mutex_);
  trainer().set_params_host(values);
}

float NativeTrainer::step(Address input, DType input_dtype, Address target, int64_t rows, Address stream,
                          Address params_out, bool checked) {
  const DifferentiableObject& model = trainer().model();
  const Stream s = reinterpret_cast<Stream>(stream);
  if (input_dtype != model.input_dtype())
    throw ShapeError("input: holds " + to_string(input_dtype) + ", the model takes " + to_string(model.input_dtype()) +
                     " (convert it first)");
  const TensorView in = TensorView::matrix(as_pointer(input), input_dtype, model.device(), rows, model.input_width(), s);
  const TensorView tgt = TensorView::matrix(as_pointer(target), DType::F32, model.device(), rows, model.output_width(), s);
  std::lock_guard<std::mutex> lock(mutex_);
  float loss = std::numeric_limits<float>::quiet_NaN();
  if (checked)
    loss = trainer().training_step(in, tgt);
  else
    trainer().training_step_async(in, tgt);
  if (params_out) copy_params_locked(params_out, s);
  return loss;
}

void NativeTrainer::copy_params_locked(Address dst, Stream s) const {
  if (n_params() == 0) return;
  const Device dev = trainer().model().device();
  const TensorView master = trainer().master_params();
  copy_tensor(TensorView::matrix(as_pointer(dst), DType::F32, dev, 1, n_params(), s),
              TensorView::matrix(master.data, DType::F32, dev, 1, n_params(), s));
}

void NativeTrainer::copy_params(Address dst, Address stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  copy_params_locked(dst, reinterpret_cast<Stream>(stream));
}

void NativeTrainer::save(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  save_checkpoint(path, model_);
}

void NativeTrainer::load(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  load_checkpoint(path, model_);
}

float NativeTrainer::last_loss() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return trainer().last_loss();
}

}  // namespace tinyfuse::python
