#include "cpu/encodings/frequency.h"

#include <cmath>
#include <type_traits>

#include "core/encodings/basic_config.h"
#include "core/encodings/frequency_math.h"
#include "cpu/encodings/cpu_encoding.h"
#include "cpu/isa_clones.h"

namespace tinyfuse::cpu {

namespace {

constexpr uint32_t kMaxFrequencies = 64;  // basic_config.cpp's bound
// |phase| up to which sincos_reduced is within 2 ulp (three-part Cody-Waite reduction by pi/2:
// j * 1.5703125 and j * 4.8375129699707031e-4 are exact while j < 2^13).
constexpr float kReducible = 8192.0f;

// sin and cos of a (|a| <= kReducible) from one reduction, as the compiler can vectorise them:
// a = j pi/2 + r with |r| <= pi/4, Cephes's minimax polynomials of sin and cos on r, then the
// quadrant j mod 4. j is rounded to nearest by the 1.5 * 2^23 trick (exact below 2^22).
TINYFUSE_ALWAYS_INLINE void sincos_reduced(float a, float& s, float& c) {
  const float j = (a * 0.636619772367581343f + 12582912.0f) - 12582912.0f;
  const float r = ((a - j * 1.5703125f) - j * 4.837512969970703125e-4f) - j * 7.54978995489188216e-8f;
  const float r2 = r * r;
  const float sp = r + r * r2 * (-1.6666654611e-1f + r2 * (8.3321608736e-3f + r2 * -1.9515295891e-4f));
  const float cp =
      1.0f - 0.5f * r2 + r2 * r2 * (4.166664568298827e-2f + r2 * (-1.388731625493765e-3f + r2 * 2.443315711809948e-5f));
  const int q = static_cast<int>(j) & 3;
  const float s0 = (q & 1) ? cp : sp, c0 = (q & 1) ? sp : cp;
  s = (q & 2) ? -s0 : s0;
  c = ((q + 1) & 2) ? -c0 : c0;
}

// frequency_encode over rows, FP32: each dim whose largest phase is reducible through
// sincos_reduced in a loop that vectorises, any other through the library's sin and cos.
TINYFUSE_ISA_CLONES void frequency_rows(uint32_t n_in, uint32_t n_freq, const float* __restrict x, int64_t ldx,
                                        float* __restrict y, int64_t ldy, int64_t rows) {
  float scale[kMaxFrequencies];
  for (uint32_t k = 0; k < n_freq; ++k) scale[k] = std::ldexp(1.0f, static_cast<int>(k));
  const float top = std::ldexp(frequency_pi<float>(), static_cast<int>(n_freq) - 1);
  for (int64_t r = 0; r < rows; ++r)
    for (uint32_t d = 0; d < n_in; ++d) {
      const float xv = x[r * ldx + d];
      float* __restrict out = y + r * ldy + d * 2 * n_freq;
      if (!(std::abs(xv) * top <= kReducible)) {  // also NaN and Inf
        frequency_encode(n_freq, xv, out);
        continue;
      }
      for (uint32_t k = 0; k < n_freq; ++k) sincos_reduced(xv * scale[k] * frequency_pi<float>(), out[2 * k], out[2 * k + 1]);
    }
}

// frequency_backward over rows, FP32, the terms from sincos_reduced as above and summed in the
// same order.
TINYFUSE_ISA_CLONES void frequency_backward_rows(uint32_t n_in, uint32_t n_freq, const float* __restrict x, int64_t ldx,
                                                 const float* __restrict g, int64_t ldg, float* __restrict dx,
                                                 int64_t ldd, int64_t rows) {
  float scale[kMaxFrequencies], rate[kMaxFrequencies], term[kMaxFrequencies];
  for (uint32_t k = 0; k < n_freq; ++k)
    scale[k] = std::ldexp(1.0f, static_cast<int>(k)), rate[k] = std::ldexp(frequency_pi<float>(), static_cast<int>(k));
  const float top = rate[n_freq - 1];
  for (int64_t r = 0; r < rows; ++r)
    for (uint32_t d = 0; d < n_in; ++d) {
      const float xv = x[r * ldx + d];
      const float* __restrict gd = g + r * ldg + d * 2 * n_freq;
      if (!(std::abs(xv) * top <= kReducible)) {
        dx[r * ldd + d] = frequency_backward(n_freq, xv, gd);
        continue;
      }
      for (uint32_t k = 0; k < n_freq; ++k) {
        float sn, cs;
        sincos_reduced(xv * scale[k] * frequency_pi<float>(), sn, cs);
        term[k] = rate[k] * (gd[2 * k] * cs - gd[2 * k + 1] * sn);
      }
      float sum = 0.0f;
      for (uint32_t k = 0; k < n_freq; ++k) sum += term[k];
      dx[r * ldd + d] = sum;
    }
}

template <typename T>
class FrequencyEncoding final : public RowwiseEncoding<T> {
 public:
  FrequencyEncoding(uint32_t n_dims, uint32_t n_frequencies)
      : RowwiseEncoding<T>("Frequency", n_dims, n_dims * n_frequencies * 2, false,
                           {{"otype", "Frequency"}, {"n_frequencies", n_frequencies}}),
        n_frequencies_(n_frequencies) {}

 protected:
  // FP32 rows through the vectorised sin and cos (within 2 ulp of the library's); FP64, the
  // reference, through the library's, row by row.
  void encode_rows(const T* x, int64_t ldx, T* y, int64_t ldy, int64_t rows) const override {
    if constexpr (std::is_same_v<T, float>)
      frequency_rows(this->input_width(), n_frequencies_, x, ldx, y, ldy, rows);
    else
      RowwiseEncoding<T>::encode_rows(x, ldx, y, ldy, rows);
  }
  void backward_rows(const T* x, int64_t ldx, const T* dL_dy, int64_t ldg, T* dx, int64_t ldd,
                     int64_t rows) const override {
    if constexpr (std::is_same_v<T, float>)
      frequency_backward_rows(this->input_width(), n_frequencies_, x, ldx, dL_dy, ldg, dx, ldd, rows);
    else
      RowwiseEncoding<T>::backward_rows(x, ldx, dL_dy, ldg, dx, ldd, rows);
  }
  // (The row functions compute what the row loops compute, so that views of any strides give the
  // same bits.)
  void encode_row(const T* x, T* y) const override {
    if constexpr (std::is_same_v<T, float>) {
      frequency_rows(this->input_width(), n_frequencies_, x, this->input_width(), y, this->output_width(), 1);
    } else {
      for (uint32_t d = 0; d < this->input_width(); ++d) frequency_encode(n_frequencies_, x[d], y + d * 2 * n_frequencies_);
    }
  }
  void backward_row(const T* x, const T* dL_dy, T* dx) const override {
    if constexpr (std::is_same_v<T, float>) {
      frequency_backward_rows(this->input_width(), n_frequencies_, x, this->input_width(), dL_dy, this->output_width(),
                              dx, this->input_width(), 1);
    } else {
      for (uint32_t d = 0; d < this->input_width(); ++d)
        dx[d] = frequency_backward(n_frequencies_, x[d], dL_dy + d * 2 * n_frequencies_);
    }
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
