// What the CPU encodings share: tiny-cuda-nn's finer padding control (so a Composite can lay its
// parts out exactly as tiny-cuda-nn does) and a base for parameter-free encodings computed one
// input row at a time.
#pragma once

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cpu/parallel.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

// An encoding that can be padded to any width >= output_width() (tiny-cuda-nn's
// set_padded_output_width) and says at which multiple its output must start inside a
// concatenation (tiny-cuda-nn's required_output_alignment).
class CpuEncoding : public Encoding {
 public:
  virtual void set_padded_output_width(uint32_t width) = 0;
  virtual uint32_t required_output_alignment() const { return 1; }
  void set_alignment(uint32_t alignment) override {
    set_padded_output_width(
        next_multiple(output_width(), std::lcm(std::max(alignment, 1u), std::max(required_output_alignment(), 1u))));
  }
};

// required_output_alignment() of any encoding: CpuEncodings say it; for others (Identity, grids)
// it is their "n_features_per_level" hyperparameter if they have one (tiny-cuda-nn's grids need
// their output to start at a multiple of it), else 1.
inline uint32_t required_output_alignment(const Encoding& encoding) {
  if (const auto* e = dynamic_cast<const CpuEncoding*>(&encoding)) return std::max(e->required_output_alignment(), 1u);
  const json hp = encoding.hyperparams();
  if (hp.is_object() && hp.contains("n_features_per_level") && hp.at("n_features_per_level").is_number_integer()) {
    const int64_t n = hp.at("n_features_per_level").get<int64_t>();
    return n > 1 ? static_cast<uint32_t>(n) : 1u;
  }
  return 1;
}

// Base of the parameter-free encodings that map each input row on its own: derived classes
// give encode_row, backward_row and the second-order jacobian_row and hessian_row; this handles
// shapes, strides, padding (features of value 1,
// tiny-cuda-nn's convention, after the real features or, for SphericalHarmonics, before them)
// and threading. Input gradients need no forward state, so forward() keeps none.
template <typename T>
class RowwiseEncoding : public CpuEncoding {
 public:
  RowwiseEncoding(std::string name, uint32_t n_inputs, uint32_t n_outputs, bool pad_in_front, json hyperparams)
      : name_(std::move(name)),
        n_in_(n_inputs),
        n_out_(n_outputs),
        pad_in_front_(pad_in_front),
        hyperparams_(std::move(hyperparams)) {}

  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return dtype_of<T>::value; }
  DType input_dtype() const override { return dtype_of<T>::value; }
  DType output_dtype() const override { return dtype_of<T>::value; }
  uint32_t input_width() const override { return n_in_; }
  uint32_t padded_output_width() const override { return n_out_ + n_pad_; }
  uint32_t output_width() const override { return n_out_; }
  size_t n_params() const override { return 0; }
  std::vector<ParamSegment> param_segments() const override { return {}; }
  void set_params(const TensorView&, const TensorView&, const TensorView&) override {}
  void initialize_params(Pcg32&, float*, float) override {}
  json hyperparams() const override { return hyperparams_; }
  std::string name() const override { return name_; }

  void set_padded_output_width(uint32_t width) override {
    if (width < n_out_)
      throw ShapeError(name_ + ": padded output width " + std::to_string(width) + " is below its output width " +
                       std::to_string(n_out_));
    n_pad_ = width - n_out_;
  }

  void inference(const TensorView& input, const TensorView& output) override { encode(input, output); }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool, bool) override {
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    if (output) encode(input, *output);
    return std::make_unique<Context>();
  }

  void backward(const Context&, const TensorView& input, const TensorView&, const TensorView& dL_doutput,
                const TensorView* dL_dinput, bool, GradientMode) override {
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    if (!dL_dinput) return;  // no parameters: only input gradients to compute
    const int64_t batch = input.rows();
    check_matrix(dL_doutput, "dL_doutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    check_matrix(*dL_dinput, "dL_dinput", batch, n_in_, dtype_of<T>::value, Device::CPU);
    const T* x = input.ptr<T>();
    const T* g = dL_doutput.ptr<T>();
    T* gx = dL_dinput->ptr<T>();
    const uint32_t first = pad_in_front_ ? n_pad_ : 0;
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      std::vector<T> xs(n_in_), gs(n_out_), dx(n_in_);
      for (int64_t b = b0; b < b1; ++b) {
        for (uint32_t d = 0; d < n_in_; ++d) xs[d] = x[b * input.strides[0] + d * input.strides[1]];
        for (uint32_t j = 0; j < n_out_; ++j)
          gs[j] = g[b * dL_doutput.strides[0] + (first + j) * dL_doutput.strides[1]];
        std::fill(dx.begin(), dx.end(), T(0));
        backward_row(xs.data(), gs.data(), dx.data());
        for (uint32_t d = 0; d < n_in_; ++d) gx[b * dL_dinput->strides[0] + d * dL_dinput->strides[1]] = dx[d];
      }
    });
  }

  // backward() wrote dL/dx = J(x)^T dL/dy; given v = dL2/d(dL/dx): dL2/d(dL/dy) = J(x) v and
  // dL2/dx = (sum_j dL/dy_j H_j(x)) v. No parameters, so no parameter gradients whatever the mode;
  // padding features are constant, so their dL2/d(dL/dy) is 0.
  void backward_backward_input(const Context&, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool, GradientMode) override {
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    check_matrix(dL_ddLdinput, "dL_ddLdinput", batch, n_in_, dtype_of<T>::value, Device::CPU);
    check_matrix(dL_doutput, "dL_doutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    if (dL_ddLdoutput)
      check_matrix(*dL_ddLdoutput, "dL_ddLdoutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", batch, n_in_, dtype_of<T>::value, Device::CPU);
    if (!dL_ddLdoutput && !dL_dinput) return;
    const uint32_t first = pad_in_front_ ? n_pad_ : 0, pad_begin = pad_in_front_ ? 0 : n_out_;
    auto at = [](const TensorView& t, int64_t b, int64_t j) -> T& {
      return t.ptr<T>()[b * t.strides[0] + j * t.strides[1]];
    };
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      std::vector<T> xs(n_in_), vs(n_in_), gs(n_out_), dy(n_out_), dx(n_in_);
      for (int64_t b = b0; b < b1; ++b) {
        for (uint32_t d = 0; d < n_in_; ++d) xs[d] = at(input, b, d), vs[d] = at(dL_ddLdinput, b, d);
        if (dL_ddLdoutput) {
          jacobian_row(xs.data(), vs.data(), dy.data());
          for (uint32_t j = 0; j < n_out_; ++j) at(*dL_ddLdoutput, b, first + j) = dy[j];
          for (uint32_t j = 0; j < n_pad_; ++j) at(*dL_ddLdoutput, b, pad_begin + j) = T(0);
        }
        if (dL_dinput) {
          for (uint32_t j = 0; j < n_out_; ++j) gs[j] = at(dL_doutput, b, first + j);
          std::fill(dx.begin(), dx.end(), T(0));
          hessian_row(xs.data(), vs.data(), gs.data(), dx.data());
          for (uint32_t d = 0; d < n_in_; ++d) at(*dL_dinput, b, d) = dx[d];
        }
      }
    });
  }

 protected:
  // y[0 .. output_width()) from x[0 .. input_width()).
  virtual void encode_row(const T* x, T* y) const = 0;
  // dx[0 .. input_width()) (zeroed by the caller) from x and dL/dy[0 .. output_width()).
  virtual void backward_row(const T* x, const T* dL_dy, T* dx) const = 0;
  // dy[0 .. output_width()) = J(x) v: the change of the features along v.
  virtual void jacobian_row(const T* x, const T* v, T* dy) const = 0;
  // dx[0 .. input_width()) (zeroed by the caller) = (sum_j dL/dy_j H_j(x)) v, H_j the Hessian of
  // feature j: the change of backward_row's dx along v.
  virtual void hessian_row(const T* x, const T* v, const T* dL_dy, T* dx) const = 0;

 private:
  static constexpr int64_t kGrain = 128;

  void encode(const TensorView& input, const TensorView& output) const {
    check_matrix(input, "input", -1, n_in_, dtype_of<T>::value, Device::CPU);
    check_matrix(output, "output", input.rows(), padded_output_width(), dtype_of<T>::value, Device::CPU);
    const T* x = input.ptr<T>();
    T* y = output.ptr<T>();
    const uint32_t first = pad_in_front_ ? n_pad_ : 0, pad_begin = pad_in_front_ ? 0 : n_out_;
    parallel_for(input.rows(), kGrain, [&](int64_t b0, int64_t b1) {
      std::vector<T> xs(n_in_), ys(n_out_);
      for (int64_t b = b0; b < b1; ++b) {
        for (uint32_t d = 0; d < n_in_; ++d) xs[d] = x[b * input.strides[0] + d * input.strides[1]];
        encode_row(xs.data(), ys.data());
        T* row = y + b * output.strides[0];
        for (uint32_t j = 0; j < n_out_; ++j) row[(first + j) * output.strides[1]] = ys[j];
        for (uint32_t j = 0; j < n_pad_; ++j) row[(pad_begin + j) * output.strides[1]] = T(1);
      }
    });
  }

  std::string name_;
  uint32_t n_in_, n_out_, n_pad_ = 0;
  bool pad_in_front_;
  json hyperparams_;
};

}  // namespace tinyfuse::cpu
