// The C++ API called directly in a loop, for benchmarks/python/binding_overhead.py: what the
// binding's cost is measured against. A developer build's (-DTINYFUSE_PYTHON_TIMING=ON, see
// python/CMakeLists.txt); the package's wheels leave it out.
#include <chrono>

#include "native_object.h"
#include "tinyfuse/buffer.h"

namespace tinyfuse::python {

double NativeObject::time_inference(Address params, Address input, int64_t rows, Address output, Address stream,
                                    int iters) {
  const DifferentiableObject& o = *object_;
  const Stream s = reinterpret_cast<Stream>(stream);
  const TensorView in = input_view(input, o.input_dtype(), rows, s), out = output_view(output, o.output_dtype(), rows, s);
  std::lock_guard<std::mutex> lock(mutex_);
  point_at(params, o.param_dtype(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) object_->inference(in, out);
  synchronize(o.device(), s);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double NativeObject::time_training(Address params, Address gradients, Address input, int64_t rows, Address output,
                                   Address doutput, Address stream, int iters) {
  const DifferentiableObject& o = *object_;
  const Stream s = reinterpret_cast<Stream>(stream);
  const TensorView in = input_view(input, o.input_dtype(), rows, s), out = output_view(output, o.output_dtype(), rows, s);
  const TensorView d_out = output_view(doutput, o.output_dtype(), rows, s);
  std::lock_guard<std::mutex> lock(mutex_);
  point_at(params, o.param_dtype(), gradients);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    std::unique_ptr<Context> ctx = object_->forward(in, &out, false, false);
    object_->backward(*ctx, in, out, d_out, nullptr, false, GradientMode::Overwrite);
  }
  synchronize(o.device(), s);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace tinyfuse::python
