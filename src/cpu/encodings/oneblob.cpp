#include "cpu/encodings/oneblob.h"

#include "core/encodings/basic_config.h"
#include "core/encodings/oneblob_math.h"
#include "cpu/encodings/cpu_encoding.h"
#include "cpu/isa_clones.h"

namespace tinyfuse::cpu {

namespace {

// oneblob_encode's features, every bin boundary's wrapped CDF computed once in a loop that
// vectorises (the same operations per boundary, the same bits): out[k] = C(k + 1) - C(k).
template <typename T>
TINYFUSE_ALWAYS_INLINE void encode_bins(uint32_t n_bins, T x, T* __restrict out) {
  T c[1025];  // n_bins <= 1024 (basic_config.cpp)
  const T n = T(n_bins);
  c[0] = oneblob_wrapped_cdf(T(0), x, n);
  for (uint32_t k = 1; k <= n_bins; ++k) c[k] = oneblob_wrapped_cdf(T(k) / n, x, n);
  for (uint32_t k = 0; k < n_bins; ++k) out[k] = c[k + 1] - c[k];
}

TINYFUSE_ISA_CLONES void encode_bins_dispatched(uint32_t n_bins, float x, float* out) { encode_bins(n_bins, x, out); }
TINYFUSE_ISA_CLONES void encode_bins_dispatched(uint32_t n_bins, double x, double* out) { encode_bins(n_bins, x, out); }

template <typename T>
class OneBlobEncoding final : public RowwiseEncoding<T> {
 public:
  OneBlobEncoding(uint32_t n_dims, uint32_t n_bins)
      : RowwiseEncoding<T>("OneBlob", n_dims, n_dims * n_bins, false, {{"otype", "OneBlob"}, {"n_bins", n_bins}}),
        n_bins_(n_bins) {}

 protected:
  void encode_row(const T* x, T* y) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d) encode_bins_dispatched(n_bins_, x[d], y + d * n_bins_);
  }
  void backward_row(const T* x, const T* dL_dy, T* dx) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d) dx[d] = oneblob_backward(n_bins_, x[d], dL_dy + d * n_bins_);
  }
  void jacobian_row(const T* x, const T* v, T* dy) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d) oneblob_jacobian(n_bins_, x[d], v[d], dy + d * n_bins_);
  }
  // Each dim's features depend on that dim alone: the Hessians are diagonal.
  void hessian_row(const T* x, const T* v, const T* dL_dy, T* dx) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d)
      dx[d] = v[d] * oneblob_backward_derivative(n_bins_, x[d], dL_dy + d * n_bins_);
  }

 private:
  uint32_t n_bins_;
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_oneblob_encoding(const OneBlobSpec& spec, uint32_t n_dims) {
  return std::make_unique<OneBlobEncoding<T>>(n_dims, spec.n_bins);
}

template std::unique_ptr<Encoding> make_oneblob_encoding<float>(const OneBlobSpec&, uint32_t);
template std::unique_ptr<Encoding> make_oneblob_encoding<double>(const OneBlobSpec&, uint32_t);

}  // namespace tinyfuse::cpu
