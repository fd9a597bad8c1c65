// The one object type the Python layer drives: a tinyfuse DifferentiableObject called with raw
// pointers, row counts, dtypes and a stream, so that no PyTorch type crosses into C++ and one
// build serves every PyTorch version. The Python side (tinyfuse/tcnn.py) owns every tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tinyfuse/object.h"

namespace tinyfuse::python {

// Forward state kept between forward() and backward() (held by the autograd graph).
struct NativeContext {
  std::unique_ptr<Context> ctx;
  int64_t rows = 0;
};

// An address as Python passes it (tensor.data_ptr()), 0 for "none".
using Address = std::uintptr_t;

class NativeObject {
 public:
  explicit NativeObject(std::shared_ptr<DifferentiableObject> object);

  const DifferentiableObject& object() const { return *object_; }
  std::shared_ptr<DifferentiableObject> shared_object() const { return object_; }

  // FP32 initial parameters (PCG32 from `seed`, as the C++ Trainer) into host memory of n_params() floats.
  void initial_params(uint64_t seed, Address host_f32, float scale) const;

  // Every call names the dtype of each tensor it passes; they must be the object's (the Python
  // layer converts first), which is checked here so that a mismatch is an error, not garbage.
  void inference(Address params, DType params_dtype, Address input, DType input_dtype, int64_t rows,
                 Address output, DType output_dtype, Address stream);
  std::unique_ptr<NativeContext> forward(Address params, DType params_dtype, Address input, DType input_dtype,
                                         int64_t rows, Address output, DType output_dtype, Address stream,
                                         bool prepare_input_gradients);
  // `gradients` 0: no parameter gradients (GradientMode::Ignore); `dinput` 0: no input gradients.
  void backward(const NativeContext& ctx, Address params, DType params_dtype, Address gradients, Address input,
                DType input_dtype, Address output, DType output_dtype, Address doutput, Address dinput,
                Address stream);

  // Second derivatives (DifferentiableObject::backward_backward_input): from dL2/d(dL/dinput)
  // to dL2/dparams (`gradients`, overwritten; 0: none), dL2/d(dL/doutput) (`dL_ddLdoutput`; 0:
  // none) and dL2/dinput (`dL_dinput`; 0: none). Objects without them raise UnsupportedError.
  void backward_backward_input(const NativeContext& ctx, Address params, DType params_dtype, Address gradients,
                               Address input, DType input_dtype, Address dL_ddLdinput, Address doutput,
                               DType output_dtype, Address dL_ddLdoutput, Address dL_dinput, Address stream);

#ifdef TINYFUSE_PYTHON_TIMING
  // The C++ API called directly in a loop, for the binding-overhead benchmark (timing_loops.cpp;
  // developer builds only): `iters` calls of inference (or forward + backward with parameter
  // gradients), then a wait for the stream. Returns the seconds taken.
  double time_inference(Address params, Address input, int64_t rows, Address output, Address stream, int iters);
  double time_training(Address params, Address gradients, Address input, int64_t rows, Address output,
                       Address doutput, Address stream, int iters);
#endif

 private:
  TensorView input_view(Address data, DType dtype, int64_t rows, Stream stream) const;
  TensorView output_view(Address data, DType dtype, int64_t rows, Stream stream) const;
  TensorView param_view(Address data, DType dtype) const;
  void point_at(Address params, DType params_dtype, Address gradients);

  std::shared_ptr<DifferentiableObject> object_;
  // The object keeps the parameter pointers of the last set_params(): a call sets them and runs
  // under this lock, so threads sharing a module do not mix their parameters.
  std::mutex mutex_;
};

}  // namespace tinyfuse::python
