#include "tinyfuse/encoding.h"

#include "core/gpu_hooks.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse {

namespace {

// dst += src, (batch, cols) matrices of F32 or F64 in host memory.
void add_on_host(const TensorView& dst, const TensorView& src) {
  auto add = [&](auto* d, const auto* s) {
    for (int64_t b = 0; b < dst.rows(); ++b)
      for (int64_t j = 0; j < dst.cols(); ++j) d[b * dst.strides[0] + j * dst.strides[1]] += s[b * src.strides[0] + j * src.strides[1]];
  };
  if (dst.dtype == DType::F64) add(dst.ptr<double>(), src.ptr<double>());
  else if (dst.dtype == DType::F32) add(dst.ptr<float>(), src.ptr<float>());
  else throw UnsupportedError("dL2/dinput in " + to_string(dst.dtype) + " is not implemented");
}

}  // namespace

// Encodings that write one dtype only accept that one.
void Encoding::set_output_dtype(DType dtype) {
  if (dtype != output_dtype())
    throw UnsupportedError(name() + " on " + to_string(device()) + " writes " + to_string(output_dtype()) +
                           " features only, not " + to_string(dtype));
}

void Encoding::backward_backward_input_and_backward(const Context& ctx, const TensorView& input, const TensorView& output,
                                                    const TensorView& dL_ddLdinput, const TensorView& dL_doutput,
                                                    const TensorView& dL_doutput_first, const TensorView* dL_dinput,
                                                    bool use_inference_params, GradientMode param_gradients_mode) {
  backward_backward_input(ctx, input, dL_ddLdinput, dL_doutput, nullptr, dL_dinput, use_inference_params,
                          param_gradients_mode);
  const GradientMode then = param_gradients_mode == GradientMode::Ignore ? GradientMode::Ignore : GradientMode::Accumulate;
  if (!dL_dinput) {
    if (then != GradientMode::Ignore) backward(ctx, input, output, dL_doutput_first, nullptr, use_inference_params, then);
    return;
  }
  // backward() writes dL/dinput; its term goes to scratch and is added.
  const Stream stream = input.stream;
  Buffer dx_buffer = Buffer::on_stream(
      device(), static_cast<size_t>(input.rows()) * static_cast<size_t>(input_width()) * dtype_size(input_dtype()), stream);
  const TensorView dx = dx_buffer.matrix(input_dtype(), input.rows(), input_width(), stream);
  backward(ctx, input, output, dL_doutput_first, &dx, use_inference_params, then);
  if (device() == Device::CPU) add_on_host(*dL_dinput, dx);
  else gpu_hooks().add(*dL_dinput, dx);
}

}  // namespace tinyfuse
