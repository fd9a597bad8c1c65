#include "native_trainer.h"

#include <cmath>
#include <limits>
#include <vector>

#include "tinyfuse/buffer.h"
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

NativeTrainer::NativeTrainer(const NativeObject& model, const json& loss, const json& optimizer, float loss_scale) {
  const BuildOptions o = options_for(model.object());
  std::shared_ptr<Loss> l = create_loss(loss, o);
  std::shared_ptr<Optimizer> opt = create_optimizer(optimizer, o);
  trainer_ = std::make_unique<Trainer>(model.shared_object(), std::move(opt), std::move(l));
  trainer_->set_loss_scale(loss_scale);
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
  if (params_out && n_params() > 0) {
    const TensorView master = trainer().master_params();
    copy_tensor(TensorView::matrix(as_pointer(params_out), DType::F32, model.device(), 1, n_params(), s),
                TensorView::matrix(master.data, DType::F32, model.device(), 1, n_params(), s));
  }
  return loss;
}

float NativeTrainer::last_loss() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return trainer().last_loss();
}

}  // namespace tinyfuse::python
