// A base for the CPU's parameter-free encodings computed one input row at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/encodings/parameter_free_encoding.h"
#include "core/view_overlap.h"
#include "cpu/parallel.h"
#include "tinyfuse/encoding.h"

namespace tinyfuse::cpu {

// Base of the parameter-free encodings that map each input row on its own: derived classes
// give encode_row, backward_row and the second-order jacobian_row and hessian_row; this handles
// shapes, strides and threading (the widths and the padding are core's ParameterFreeEncoding).
// Input gradients need no forward state, so forward() keeps none.
template <typename T>
class RowwiseEncoding : public ParameterFreeEncoding<PaddableEncoding> {
 public:
  using ParameterFreeEncoding<PaddableEncoding>::ParameterFreeEncoding;

  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return dtype_of<T>::value; }
  DType input_dtype() const override { return dtype_of<T>::value; }
  DType output_dtype() const override { return dtype_of<T>::value; }

  void inference(const TensorView& input, const TensorView& output) override { encode(input, output); }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool, bool) override {
    check_matrix(input, "input", -1, input_width(), dtype_of<T>::value, Device::CPU);
    if (output) encode(input, *output);
    return std::make_unique<Context>();
  }

  void backward(const Context&, const TensorView& input, const TensorView&, const TensorView& dL_doutput,
                const TensorView* dL_dinput, bool, GradientMode) override {
    const uint32_t n_in = input_width(), n_out = output_width(), first = first_feature();
    check_matrix(input, "input", -1, n_in, dtype_of<T>::value, Device::CPU);
    if (!dL_dinput) return;  // no parameters: only input gradients to compute
    const int64_t batch = input.rows();
    check_matrix(dL_doutput, "dL_doutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    check_matrix(*dL_dinput, "dL_dinput", batch, n_in, dtype_of<T>::value, Device::CPU);
    const T* x = input.ptr<T>();
    const T* g = dL_doutput.ptr<T>();
    T* gx = dL_dinput->ptr<T>();
    if (input.rows_dense() && dL_doutput.rows_dense() && dL_dinput->rows_dense() && !views_overlap(input, *dL_dinput) &&
        !views_overlap(dL_doutput, *dL_dinput)) {
      const int64_t ldx = input.strides[0], ldg = dL_doutput.strides[0], ldd = dL_dinput->strides[0];
      parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
        backward_rows(x + b0 * ldx, ldx, g + b0 * ldg + first, ldg, gx + b0 * ldd, ldd, b1 - b0);
      });
      return;
    }
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      std::vector<T> xs(n_in), gs(n_out), dx(n_in);
      for (int64_t b = b0; b < b1; ++b) {
        for (uint32_t d = 0; d < n_in; ++d) xs[d] = x[b * input.strides[0] + d * input.strides[1]];
        for (uint32_t j = 0; j < n_out; ++j)
          gs[j] = g[b * dL_doutput.strides[0] + (first + j) * dL_doutput.strides[1]];
        std::fill(dx.begin(), dx.end(), T(0));
        backward_row(xs.data(), gs.data(), dx.data());
        for (uint32_t d = 0; d < n_in; ++d) gx[b * dL_dinput->strides[0] + d * dL_dinput->strides[1]] = dx[d];
      }
    });
  }

  // backward() wrote dL/dx = J(x)^T dL/dy; given v = dL2/d(dL/dx): dL2/d(dL/dy) = J(x) v and
  // dL2/dx = (sum_j dL/dy_j H_j(x)) v. No parameters, so no parameter gradients whatever the mode;
  // padding features are constant, so their dL2/d(dL/dy) is 0.
  void backward_backward_input(const Context&, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool, GradientMode) override {
    const uint32_t n_in = input_width(), n_out = output_width(), n_pad = padding();
    const uint32_t first = first_feature(), pad_begin = padding_begin();
    check_matrix(input, "input", -1, n_in, dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    check_matrix(dL_ddLdinput, "dL_ddLdinput", batch, n_in, dtype_of<T>::value, Device::CPU);
    check_matrix(dL_doutput, "dL_doutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    if (dL_ddLdoutput)
      check_matrix(*dL_ddLdoutput, "dL_ddLdoutput", batch, padded_output_width(), dtype_of<T>::value, Device::CPU);
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", batch, n_in, dtype_of<T>::value, Device::CPU);
    if (!dL_ddLdoutput && !dL_dinput) return;
    auto at = [](const TensorView& t, int64_t b, int64_t j) -> T& {
      return t.ptr<T>()[b * t.strides[0] + j * t.strides[1]];
    };
    parallel_for(batch, kGrain, [&](int64_t b0, int64_t b1) {
      std::vector<T> xs(n_in), vs(n_in), gs(n_out), dy(n_out), dx(n_in);
      for (int64_t b = b0; b < b1; ++b) {
        for (uint32_t d = 0; d < n_in; ++d) xs[d] = at(input, b, d), vs[d] = at(dL_ddLdinput, b, d);
        if (dL_ddLdoutput) {
          jacobian_row(xs.data(), vs.data(), dy.data());
          for (uint32_t j = 0; j < n_out; ++j) at(*dL_ddLdoutput, b, first + j) = dy[j];
          for (uint32_t j = 0; j < n_pad; ++j) at(*dL_ddLdoutput, b, pad_begin + j) = T(0);
        }
        if (dL_dinput) {
          for (uint32_t j = 0; j < n_out; ++j) gs[j] = at(dL_doutput, b, first + j);
          std::fill(dx.begin(), dx.end(), T(0));
          hessian_row(xs.data(), vs.data(), gs.data(), dx.data());
          for (uint32_t d = 0; d < n_in; ++d) at(*dL_dinput, b, d) = dx[d];
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

  // encode_row over `rows` rows with features adjacent (x rows ldx apart, y's features from y, rows
  // ldy apart), and backward_row likewise (dx written, not added to). An encoding overrides them
  // with loops the compiler vectorises; the results must be encode_row's and backward_row's.
  virtual void encode_rows(const T* x, int64_t ldx, T* y, int64_t ldy, int64_t rows) const {
    for (int64_t r = 0; r < rows; ++r) encode_row(x + r * ldx, y + r * ldy);
  }
  virtual void backward_rows(const T* x, int64_t ldx, const T* dL_dy, int64_t ldg, T* dx, int64_t ldd,
                             int64_t rows) const {
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(dx + r * ldd, dx + r * ldd + input_width(), T(0));
      backward_row(x + r * ldx, dL_dy + r * ldg, dx + r * ldd);
    }
  }

 private:
  static constexpr int64_t kGrain = 128;

  void encode(const TensorView& input, const TensorView& output) const {
    const uint32_t n_in = input_width(), n_out = output_width(), n_pad = padding();
    const uint32_t first = first_feature(), pad_begin = padding_begin();
    check_matrix(input, "input", -1, n_in, dtype_of<T>::value, Device::CPU);
    check_matrix(output, "output", input.rows(), padded_output_width(), dtype_of<T>::value, Device::CPU);
    const T* x = input.ptr<T>();
    T* y = output.ptr<T>();
    if (input.rows_dense() && output.rows_dense() && !views_overlap(input, output)) {
      const int64_t ldx = input.strides[0], ldy = output.strides[0];
      parallel_for(input.rows(), kGrain, [&](int64_t b0, int64_t b1) {
        encode_rows(x + b0 * ldx, ldx, y + b0 * ldy + first, ldy, b1 - b0);
        for (int64_t b = b0; b < b1; ++b) std::fill(y + b * ldy + pad_begin, y + b * ldy + pad_begin + n_pad, T(1));
      });
      return;
    }
    parallel_for(input.rows(), kGrain, [&](int64_t b0, int64_t b1) {
      std::vector<T> xs(n_in), ys(n_out);
      for (int64_t b = b0; b < b1; ++b) {
        for (uint32_t d = 0; d < n_in; ++d) xs[d] = x[b * input.strides[0] + d * input.strides[1]];
        encode_row(xs.data(), ys.data());
        T* row = y + b * output.strides[0];
        for (uint32_t j = 0; j < n_out; ++j) row[(first + j) * output.strides[1]] = ys[j];
        for (uint32_t j = 0; j < n_pad; ++j) row[(pad_begin + j) * output.strides[1]] = T(1);
      }
    });
  }
};

}  // namespace tinyfuse::cpu
