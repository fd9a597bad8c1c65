#include "tinyfuse/trainer.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "core/host_memory.h"
#include "core/memory_plan.h"
#include "core/optimizers/optimizer_base.h"

namespace tinyfuse {

namespace {
// tiny-cuda-nn scales losses for 16-bit parameters so small gradients survive the cast.
float default_loss_scale(DType param_dtype) {
  return param_dtype == DType::F16 || param_dtype == DType::BF16 ? 128.0f : 1.0f;
}

// Work on the parameters outside a batch (optimizer step, reads and writes from the host) goes on
// the stream of the last training batch, so that on GPUs it is ordered after that batch's
// forward and backward (null before the first batch: this thread's default stream).
TensorView on_stream(TensorView v, Stream s) {
  v.stream = s;
  return v;
}

// A contiguous 1-D view as one row, so that GPU copies of it are a single linear transfer.
TensorView as_row(const TensorView& v) { return TensorView::matrix(v.data, v.dtype, v.device, 1, v.numel(), v.stream); }
}  // namespace

// Loss values are kept in FP32 even for 16-bit outputs (FP64 in the CPU reference mode).
DType Trainer::loss_value_dtype() const { return model_->output_dtype() == DType::F64 ? DType::F64 : DType::F32; }

Trainer::Trainer(std::shared_ptr<DifferentiableObject> model, std::shared_ptr<Optimizer> optimizer,
                 std::shared_ptr<Loss> loss, uint64_t seed, float param_scale)
    : model_(std::move(model)), optimizer_(std::move(optimizer)), loss_(std::move(loss)) {
  if (!model_ || !optimizer_ || !loss_) throw Error("Trainer: model, optimizer and loss are all required");
  const Device dev = model_->device();
  if (optimizer_->device() != dev || loss_->device() != dev)
    throw UnsupportedError("Trainer: model on " + to_string(dev) + ", optimizer on " + to_string(optimizer_->device()) +
                           ", loss on " + to_string(loss_->device()) + "; build all three for one device");
  loss_scale_ = default_loss_scale(model_->param_dtype());
  const size_t n = model_->n_params();
  const int64_t es = static_cast<int64_t>(dtype_size(model_->param_dtype()));
  const int64_t n_signed = static_cast<int64_t>(std::min<size_t>(n, INT64_MAX));
  const bool on_host = dev == Device::CPU;
  // Everything the model will hold, checked together before any of it is allocated.
  memory_plan().check();
  master_ = Buffer(dev, checked_bytes({n_signed, 4}, "the FP32 master parameters", on_host));
  params_ = Buffer(dev, checked_bytes({n_signed, es}, "the parameters", on_host));
  gradients_ = Buffer(dev, checked_bytes({n_signed, es}, "the gradients", on_host));
  if (optimizer_->has_inference_params()) inference_params_ = Buffer(dev, checked_bytes({n_signed, es}, "the inference parameters", on_host));
  optimizer_->allocate(n, model_->param_segments());
  model_->set_params(params(), inference_params(), gradients());

  std::vector<float> host(n, 0.0f);
  Pcg32 rng(seed);
  model_->initialize_params(rng, host.data(), param_scale);
  set_params_host(host);
  if (n) fill_tensor(gradients(), 0.0);
  synchronize(dev, nullptr);  // before a first batch on any other stream writes the gradients
}

MemoryPlan Trainer::memory_plan() const {
  const size_t n = model_->n_params();
  const size_t es = dtype_size(model_->param_dtype());
  const bool on_host = model_->device() == Device::CPU;
  MemoryPlan plan("a Trainer of " + model_->name() + " (" + std::to_string(n) + " parameters)");
  plan.add("FP32 master parameters", n, 4, on_host);
  plan.add(to_string(model_->param_dtype()) + " parameters", n, es, on_host);
  plan.add("gradients", n, es, on_host);
  if (optimizer_->has_inference_params()) plan.add("inference parameters", n, es, on_host);
  if (const auto* o = dynamic_cast<const OptimizerBase*>(optimizer_.get())) o->plan_memory(plan, n);
  plan.add("initial values (host)", n, 4, true);
  return plan;
}

TensorView Trainer::params() const { return params_.vector(model_->param_dtype(), static_cast<int64_t>(model_->n_params())); }
TensorView Trainer::master_params() const {
  return master_.vector(DType::F32, static_cast<int64_t>(model_->n_params()), stream_);
}
TensorView Trainer::gradients() const { return gradients_.vector(model_->param_dtype(), static_cast<int64_t>(model_->n_params())); }
TensorView Trainer::inference_params() const {
  return optimizer_->has_inference_params() ? inference_params_.vector(model_->param_dtype(), static_cast<int64_t>(model_->n_params()))
                                            : params();
}

std::vector<float> Trainer::params_host() const {
  std::vector<float> out(model_->n_params());
  if (!out.empty())
    copy_tensor(as_row(TensorView::vector(out.data(), static_cast<int64_t>(out.size()))),
                as_row(master_.vector(DType::F32, static_cast<int64_t>(out.size()), stream_)));
  return out;
}

void Trainer::set_loss_scale(float s) {
  if (!std::isfinite(s) || s <= 0.0f)
    throw Error("Trainer::set_loss_scale(" + std::to_string(s) + "): the loss scale must be a finite number > 0; it was left at " +
                std::to_string(loss_scale_));
  loss_scale_ = s;
}

void Trainer::set_params_host(const std::vector<float>& values) {
  if (values.size() != model_->n_params())
    throw ShapeError("Trainer::set_params_host: expected " + std::to_string(model_->n_params()) + " values, got " +
                     std::to_string(values.size()));
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw Error("Trainer::set_params_host: value " + std::to_string(i) + " is " + std::to_string(values[i]) +
                  ", not finite; the parameters were left unchanged");
  if (values.empty()) return;
  TensorView src = TensorView::vector(const_cast<float*>(values.data()), static_cast<int64_t>(values.size()));
  copy_tensor(as_row(master_.vector(DType::F32, src.numel(), stream_)), as_row(src));
  refresh_compute_params();
  synchronize(model_->device(), stream_);  // the next batch may run on another stream
}

void Trainer::refresh_compute_params() {
  const int64_t n = static_cast<int64_t>(model_->n_params());
  if (n == 0) return;
  const Stream s = stream_;
  TensorView master = master_.vector(DType::F32, n, s);
  // (Between F32 and 16-bit dtypes on a GPU, copy_tensor converts on the host: fine here, this
  // runs when parameters are set, not per step.)
  copy_tensor(as_row(on_stream(params(), s)), as_row(master));
  if (optimizer_->has_inference_params()) copy_tensor(as_row(on_stream(inference_params(), s)), as_row(master));
}

void Trainer::ensure_batch_buffers(int64_t batch, Stream) {
  if (batch <= batch_capacity_) return;
  const int64_t width = model_->padded_output_width();
  const bool host = model_->device() == Device::CPU;
  const auto bytes = [&](DType t, const char* what) {
    return checked_bytes({batch, width, static_cast<int64_t>(dtype_size(t))}, what, host);
  };
  // All sizes first, so that a batch that cannot fit changes nothing.
  const size_t out_bytes = bytes(model_->output_dtype(), "the training batch's outputs");
  // Loss values per row (loss.h): their sum is the loss, and a step writes 4 (or 8) bytes of them
  // per sample instead of that per output element.
  const size_t value_bytes =
      checked_bytes({batch, static_cast<int64_t>(dtype_size(loss_value_dtype()))}, "the training batch's loss values", host);
  // (Each is at most the machine's memory, so the sum cannot overflow.)
  if (host) check_host_request(2 * out_bytes + value_bytes, "the training batch's outputs, loss values and loss gradients");
  output_ = Buffer(model_->device(), out_bytes);
  loss_values_ = Buffer(model_->device(), value_bytes);
  loss_gradients_ = Buffer(model_->device(), out_bytes);
  batch_capacity_ = batch;
}

void Trainer::forward_backward(const TensorView& input, const TensorView& target, const TensorView* data_pdf) {
  check_matrix(input, "Trainer: input", -1, model_->input_width(), model_->input_dtype(), model_->device());
  const int64_t batch = input.rows();
  if (batch == 0) throw ShapeError("Trainer: a training batch needs at least one sample");
  if (target.rows() != batch || target.cols() != model_->output_width())
    throw ShapeError("Trainer: target must be (" + std::to_string(batch) + ", " + std::to_string(model_->output_width()) +
                     "), got " + target.describe());
  ensure_batch_buffers(batch, input.stream);
  const size_t width = model_->padded_output_width();
  const DType out_t = model_->output_dtype();
  TensorView output = output_.matrix(out_t, batch, width, input.stream);
  TensorView values = loss_values_.matrix(loss_value_dtype(), batch, 1, input.stream);
  TensorView grads = loss_gradients_.matrix(out_t, batch, width, input.stream);
  try {
    // (The model may run forward, loss and backward in one kernel and leave `output` and `grads`
    // unwritten: object.h.)
    model_->forward_backward_with_loss(input, output, *loss_, loss_scale_, target, values, grads, data_pdf,
                                       GradientMode::Overwrite);
  } catch (const std::bad_alloc&) {
    // A scratch allocation the size checks let through failed: report it as tinyfuse's error.
    throw OutOfMemoryError(0, "a training batch of " + std::to_string(batch) + " samples", "an allocation failed");
  }
  last_values_ = values;
  has_last_loss_ = true;
  stream_ = input.stream;
}

void Trainer::optimizer_step() { optimizer_step(stream_); }

void Trainer::optimizer_step(Stream s) {
  stream_ = s;
  const int64_t n = static_cast<int64_t>(model_->n_params());
  optimizer_->step(loss_scale_, master_.vector(DType::F32, n, s), on_stream(params(), s), on_stream(gradients(), s));
  if (optimizer_->has_inference_params()) optimizer_->write_inference_params(on_stream(inference_params(), s));
}

float Trainer::last_loss() const {
  if (!has_last_loss_) throw Error("Trainer::last_loss: no training step has run yet");
  return static_cast<float>(sum_tensor(last_values_));
}

void Trainer::training_step_async(const TensorView& input, const TensorView& target, const TensorView* data_pdf) {
  forward_backward(input, target, data_pdf);
  optimizer_step();
}

float Trainer::training_step(const TensorView& input, const TensorView& target, const TensorView* data_pdf) {
  forward_backward(input, target, data_pdf);
  const float loss = last_loss();
  // A non-finite loss would poison every parameter through the optimizer: refuse the step.
  if (!std::isfinite(loss))
    throw Error("Trainer::training_step: loss is " + std::to_string(loss) +
                " (NaN/Inf in inputs, targets or parameters?); the optimizer step was skipped and the parameters are unchanged");
  // A finite loss does not make finite gradients: ReLU (z > 0 ? z : 0, as tiny-cuda-nn's) gives a
  // NaN input row a finite output, while the first layer's weight gradient still multiplies the
  // NaN (0 * NaN). One sum over the gradients (on the device) catches it.
  if (model_->n_params() > 0 && !std::isfinite(sum_tensor(gradients())))
    throw Error("Trainer::training_step: the parameter gradients hold NaN or Inf although the loss is finite (" +
                std::to_string(loss) +
                "; NaN/Inf in the inputs, which ReLU turns into finite outputs?); the optimizer step "
                "was skipped and the parameters are unchanged");
  optimizer_step();
  return loss;
}

}  // namespace tinyfuse
