#include "cpu/encodings/frequency.h"

#include "core/encodings/basic_config.h"
#include "core/encodings/frequency_math.h"
#include "cpu/encodings/cpu_encoding.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class FrequencyEncoding final : public RowwiseEncoding<T> {
 public:
  FrequencyEncoding(uint32_t n_dims, uint32_t n_frequencies)
      : RowwiseEncoding<T>("Frequency", n_dims, n_dims * n_frequencies * 2, false,
                           {{"otype", "Frequency"}, {"n_frequencies", n_frequencies}}),
        n_frequencies_(n_frequencies) {}

 protected:
  void encode_row(const T* x, T* y) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d) frequency_encode(n_frequencies_, x[d], y + d * 2 * n_frequencies_);
  }
  void backward_row(const T* x, const T* dL_dy, T* dx) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d)
      dx[d] = frequency_backward(n_frequencies_, x[d], dL_dy + d * 2 * n_frequencies_);
  }
  void jacobian_row(const T* x, const T* v, T* dy) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d) frequency_jacobian(n_frequencies_, x[d], v[d], dy + d * 2 * n_frequencies_);
  }
  // Each dim's features depend on that dim alone: the Hessians are diagonal.
  void hessian_row(const T* x, const T* v, const T* dL_dy, T* dx) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d)
      dx[d] = v[d] * frequency_backward_derivative(n_frequencies_, x[d], dL_dy + d * 2 * n_frequencies_);
  }

 private:
  uint32_t n_frequencies_;
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_frequency_encoding(const FrequencySpec& spec, uint32_t n_dims) {
  return std::make_unique<FrequencyEncoding<T>>(n_dims, spec.n_frequencies);
}

template std::unique_ptr<Encoding> make_frequency_encoding<float>(const FrequencySpec&, uint32_t);
template std::unique_ptr<Encoding> make_frequency_encoding<double>(const FrequencySpec&, uint32_t);

}  // namespace tinyfuse::cpu
