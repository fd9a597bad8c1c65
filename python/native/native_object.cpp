#include "native_object.h"

#include <vector>

#include "tinyfuse/buffer.h"
#include "tinyfuse/errors.h"
#include "tinyfuse/random.h"

namespace tinyfuse::python {

namespace {

Stream as_stream(Address s) { return reinterpret_cast<Stream>(s); }
void* as_pointer(Address a) { return reinterpret_cast<void*>(a); }

void check_dtype(const char* what, DType got, DType expected) {
  if (got != expected)
    throw ShapeError(std::string(what) + ": holds " + to_string(got) + ", the object computes with " +
                     to_string(expected) + " (convert it first)");
}

}  // namespace

NativeObject::NativeObject(std::shared_ptr<DifferentiableObject> object) : object_(std::move(object)) {}

void NativeObject::initial_params(uint64_t seed, Address host_f32, float scale) const {
  Pcg32 rng(seed);
  object_->initialize_params(rng, static_cast<float*>(as_pointer(host_f32)), scale);
}

TensorView NativeObject::input_view(Address data, DType dtype, int64_t rows, Stream stream) const {
  check_dtype("input", dtype, object_->input_dtype());
  return TensorView::matrix(as_pointer(data), dtype, object_->device(), rows, object_->input_width(), stream);
}

TensorView NativeObject::output_view(Address data, DType dtype, int64_t rows, Stream stream) const {
  check_dtype("output", dtype, object_->output_dtype());
  return TensorView::matrix(as_pointer(data), dtype, object_->device(), rows, object_->padded_output_width(), stream);
}

TensorView NativeObject::param_view(Address data, DType dtype) const {
  check_dtype("params", dtype, object_->param_dtype());
  return TensorView::vector(as_pointer(data), dtype, object_->device(), static_cast<int64_t>(object_->n_params()));
}

void NativeObject::point_at(Address params, DType params_dtype, Address gradients) {
  const TensorView p = param_view(params, params_dtype);
  TensorView g = p;
  g.data = as_pointer(gradients);
  if (!gradients) g = TensorView{};
  object_->set_params(p, p, g);
}

void NativeObject::inference(Address params, DType params_dtype, Address input, DType input_dtype, int64_t rows,
                             Address output, DType output_dtype, Address stream) {
  const Stream s = as_stream(stream);
  const TensorView in = input_view(input, input_dtype, rows, s), out = output_view(output, output_dtype, rows, s);
  std::lock_guard<std::mutex> lock(mutex_);
  point_at(params, params_dtype, 0);
  object_->inference(in, out);
}

std::unique_ptr<NativeContext> NativeObject::forward(Address params, DType params_dtype, Address input,
                                                     DType input_dtype, int64_t rows, Address output,
                                                     DType output_dtype, Address stream, bool prepare_input_gradients) {
  const Stream s = as_stream(stream);
  const TensorView in = input_view(input, input_dtype, rows, s), out = output_view(output, output_dtype, rows, s);
  auto result = std::make_unique<NativeContext>();
  result->rows = rows;
  std::lock_guard<std::mutex> lock(mutex_);
  point_at(params, params_dtype, 0);
  result->ctx = object_->forward(in, &out, false, prepare_input_gradients);
  return result;
}

void NativeObject::backward(const NativeContext& ctx, Address params, DType params_dtype, Address gradients,
                            Address input, DType input_dtype, Address output, DType output_dtype, Address doutput,
                            Address dinput, Address stream) {
  if (!ctx.ctx) throw Error("backward: the forward context is empty (was backward already run on it?)");
  const Stream s = as_stream(stream);
  const int64_t rows = ctx.rows;
  const TensorView in = input_view(input, input_dtype, rows, s), out = output_view(output, output_dtype, rows, s);
  const TensorView d_out = output_view(doutput, output_dtype, rows, s);
  const TensorView d_in = input_view(dinput, input_dtype, rows, s);
  std::lock_guard<std::mutex> lock(mutex_);
  point_at(params, params_dtype, gradients);
  object_->backward(*ctx.ctx, in, out, d_out, dinput ? &d_in : nullptr, false,
                    gradients ? GradientMode::Overwrite : GradientMode::Ignore);
}

void NativeObject::backward_backward_input(const NativeContext& ctx, Address params, DType params_dtype,
                                           Address gradients, Address input, DType input_dtype, Address dL_ddLdinput,
                                           Address doutput, DType output_dtype, Address dL_ddLdoutput,
                                           Address dL_dinput, Address stream) {
  if (!ctx.ctx) throw Error("backward_backward_input: the forward context is empty");
  const Stream s = as_stream(stream);
  const int64_t rows = ctx.rows;
  // dL2/d(dL/dinput) and dL2/dinput are laid out as the input, dL2/d(dL/doutput) as the output.
  const TensorView in = input_view(input, input_dtype, rows, s), v = input_view(dL_ddLdinput, input_dtype, rows, s);
  const TensorView d_out = output_view(doutput, output_dtype, rows, s);
  const TensorView dd_out = output_view(dL_ddLdoutput, output_dtype, rows, s);
  const TensorView d_in = input_view(dL_dinput, input_dtype, rows, s);
  std::lock_guard<std::mutex> lock(mutex_);
  point_at(params, params_dtype, gradients);
  object_->backward_backward_input(*ctx.ctx, in, v, d_out, dL_ddLdoutput ? &dd_out : nullptr,
                                   dL_dinput ? &d_in : nullptr, false,
                                   gradients ? GradientMode::Overwrite : GradientMode::Ignore);
}

}  // namespace tinyfuse::python
