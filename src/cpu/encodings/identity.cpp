#include "cpu/encodings/identity.h"

#include "cpu/parallel.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class IdentityEncoding final : public Encoding {
 public:
  IdentityEncoding(uint32_t n_dims, float scale, float offset, json hp)
      : n_dims_(n_dims), scale_(scale), offset_(offset), padded_(n_dims), hyperparams_(std::move(hp)) {}

  Device device() const override { return Device::CPU; }
  DType param_dtype() const override { return dtype_of<T>::value; }
  DType input_dtype() const override { return dtype_of<T>::value; }
  DType output_dtype() const override { return dtype_of<T>::value; }
  uint32_t input_width() const override { return n_dims_; }
  uint32_t padded_output_width() const override { return padded_; }
  uint32_t output_width() const override { return n_dims_; }
  size_t n_params() const override { return 0; }
  std::vector<ParamSegment> param_segments() const override { return {}; }
  void set_params(const TensorView&, const TensorView&, const TensorView&) override {}
  void initialize_params(Pcg32&, float*, float) override {}
  void set_alignment(uint32_t alignment) override { padded_ = next_multiple(n_dims_, std::max(alignment, 1u)); }
  json hyperparams() const override { return hyperparams_; }
  std::string name() const override { return "Identity"; }

  void inference(const TensorView& input, const TensorView& output) override { encode(input, output); }

  std::unique_ptr<Context> forward(const TensorView& input, const TensorView* output, bool, bool) override {
    check_matrix(input, "input", -1, n_dims_, dtype_of<T>::value, Device::CPU);
    if (output) encode(input, *output);
    return std::make_unique<Context>();
  }

  void backward(const Context&, const TensorView& input, const TensorView&, const TensorView& dL_doutput,
                const TensorView* dL_dinput, bool, GradientMode) override {
    // The input is not read, but a wrong one means the call is not what the caller thinks.
    check_matrix(input, "input", -1, n_dims_, dtype_of<T>::value, Device::CPU);
    if (!dL_dinput) return;
    const int64_t batch = input.rows();
    check_matrix(dL_doutput, "dL_doutput", batch, padded_, dtype_of<T>::value, Device::CPU);
    check_matrix(*dL_dinput, "dL_dinput", batch, n_dims_, dtype_of<T>::value, Device::CPU);
    const T* g = dL_doutput.ptr<T>();
    T* gi = dL_dinput->ptr<T>();
    parallel_for(batch, 4096, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (uint32_t d = 0; d < n_dims_; ++d)
          gi[b * dL_dinput->strides[0] + d * dL_dinput->strides[1]] =
              g[b * dL_doutput.strides[0] + d * dL_doutput.strides[1]] * T(scale_);
    });
  }

  // Linear: dL2/d(dL/doutput) = scale * v on the real columns (0 on padding) and dL2/dinput = 0.
  void backward_backward_input(const Context&, const TensorView& input, const TensorView& dL_ddLdinput,
                               const TensorView& dL_doutput, const TensorView* dL_ddLdoutput,
                               const TensorView* dL_dinput, bool, GradientMode) override {
    check_matrix(input, "input", -1, n_dims_, dtype_of<T>::value, Device::CPU);
    const int64_t batch = input.rows();
    check_matrix(dL_ddLdinput, "dL_ddLdinput", batch, n_dims_, dtype_of<T>::value, Device::CPU);
    check_matrix(dL_doutput, "dL_doutput", batch, padded_, dtype_of<T>::value, Device::CPU);
    if (dL_ddLdoutput) check_matrix(*dL_ddLdoutput, "dL_ddLdoutput", batch, padded_, dtype_of<T>::value, Device::CPU);
    if (dL_dinput) check_matrix(*dL_dinput, "dL_dinput", batch, n_dims_, dtype_of<T>::value, Device::CPU);
    const T* v = dL_ddLdinput.ptr<T>();
    parallel_for(batch, 4096, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        if (dL_ddLdoutput) {
          T* row = dL_ddLdoutput->ptr<T>() + b * dL_ddLdoutput->strides[0];
          for (uint32_t d = 0; d < padded_; ++d)
            row[d * dL_ddLdoutput->strides[1]] =
                d < n_dims_ ? v[b * dL_ddLdinput.strides[0] + d * dL_ddLdinput.strides[1]] * T(scale_) : T(0);
        }
        if (dL_dinput)
          for (uint32_t d = 0; d < n_dims_; ++d) dL_dinput->ptr<T>()[b * dL_dinput->strides[0] + d * dL_dinput->strides[1]] = T(0);
      }
    });
  }

 private:
  void encode(const TensorView& input, const TensorView& output) const {
    check_matrix(input, "input", -1, n_dims_, dtype_of<T>::value, Device::CPU);
    check_matrix(output, "output", input.rows(), padded_, dtype_of<T>::value, Device::CPU);
    const T* x = input.ptr<T>();
    T* y = output.ptr<T>();
    parallel_for(input.rows(), 4096, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (uint32_t d = 0; d < padded_; ++d)
          y[b * output.strides[0] + d * output.strides[1]] =
              d < n_dims_ ? x[b * input.strides[0] + d * input.strides[1]] * T(scale_) + T(offset_) : T(1);
    });
  }

  uint32_t n_dims_;
  float scale_, offset_;
  uint32_t padded_;
  json hyperparams_;
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_identity_encoding(uint32_t n_dims, float scale, float offset, json hp) {
  return std::make_unique<IdentityEncoding<T>>(n_dims, scale, offset, std::move(hp));
}

template std::unique_ptr<Encoding> make_identity_encoding<float>(uint32_t, float, float, json);
template std::unique_ptr<Encoding> make_identity_encoding<double>(uint32_t, float, float, json);

}  // namespace tinyfuse::cpu
