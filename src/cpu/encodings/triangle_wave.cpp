#include "cpu/encodings/triangle_wave.h"

#include <cmath>

#include "core/encodings/basic_config.h"
#include "core/encodings/triangle_wave_math.h"
#include "cpu/encodings/cpu_encoding.h"
#include "cpu/isa_clones.h"

namespace tinyfuse::cpu {

namespace {

constexpr uint32_t kMaxFrequencies = 64;  // basic_config.cpp's bound

// triangle_wave_encode over rows, the phase's ldexp(x, k - 1) as x times the exact power of two
// (the same value), in loops that vectorise: the same bits.
template <typename T>
TINYFUSE_ALWAYS_INLINE void triangle_rows(uint32_t n_in, uint32_t n_freq, const T* __restrict x, int64_t ldx,
                                          T* __restrict y, int64_t ldy, int64_t rows) {
  T scale[kMaxFrequencies], shift[kMaxFrequencies];
  for (uint32_t k = 0; k < n_freq; ++k) scale[k] = std::ldexp(T(1), static_cast<int>(k) - 1), shift[k] = T(0.25) * T(k);
  for (int64_t r = 0; r < rows; ++r)
    for (uint32_t d = 0; d < n_in; ++d) {
      const T xv = x[r * ldx + d];
      T* __restrict out = y + r * ldy + d * n_freq;
      for (uint32_t k = 0; k < n_freq; ++k) {
        const T v = xv * scale[k] + shift[k];
        out[k] = std::abs(v - std::floor(v) - T(0.5)) * T(4) - T(1);
      }
    }
}

// triangle_wave_backward over rows: the slopes +-2^(k+1) in a loop that vectorises, summed in
// the same order: the same bits.
template <typename T>
TINYFUSE_ALWAYS_INLINE void triangle_backward_rows(uint32_t n_in, uint32_t n_freq, const T* __restrict x, int64_t ldx,
                                                   const T* __restrict g, int64_t ldg, T* __restrict dx, int64_t ldd,
                                                   int64_t rows) {
  T scale[kMaxFrequencies], shift[kMaxFrequencies], rate[kMaxFrequencies], term[kMaxFrequencies];
  for (uint32_t k = 0; k < n_freq; ++k) {
    scale[k] = std::ldexp(T(1), static_cast<int>(k) - 1), shift[k] = T(0.25) * T(k);
    rate[k] = std::ldexp(T(1), static_cast<int>(k) + 1);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (uint32_t d = 0; d < n_in; ++d) {
      const T xv = x[r * ldx + d];
      const T* __restrict gd = g + r * ldg + d * n_freq;
      for (uint32_t k = 0; k < n_freq; ++k) {
        const T v = xv * scale[k] + shift[k];
        term[k] = gd[k] * (v - std::floor(v) < T(0.5) ? -rate[k] : rate[k]);
      }
      T sum = T(0);
      for (uint32_t k = 0; k < n_freq; ++k) sum += term[k];
      dx[r * ldd + d] = sum;
    }
}

TINYFUSE_ISA_CLONES void triangle_backward_dispatched(uint32_t n_in, uint32_t n_freq, const float* x, int64_t ldx,
                                                      const float* g, int64_t ldg, float* dx, int64_t ldd, int64_t rows) {
  triangle_backward_rows(n_in, n_freq, x, ldx, g, ldg, dx, ldd, rows);
}
TINYFUSE_ISA_CLONES void triangle_backward_dispatched(uint32_t n_in, uint32_t n_freq, const double* x, int64_t ldx,
                                                      const double* g, int64_t ldg, double* dx, int64_t ldd,
                                                      int64_t rows) {
  triangle_backward_rows(n_in, n_freq, x, ldx, g, ldg, dx, ldd, rows);
}

TINYFUSE_ISA_CLONES void triangle_rows_dispatched(uint32_t n_in, uint32_t n_freq, const float* x, int64_t ldx, float* y,
                                                  int64_t ldy, int64_t rows) {
  triangle_rows(n_in, n_freq, x, ldx, y, ldy, rows);
}
TINYFUSE_ISA_CLONES void triangle_rows_dispatched(uint32_t n_in, uint32_t n_freq, const double* x, int64_t ldx,
                                                  double* y, int64_t ldy, int64_t rows) {
  triangle_rows(n_in, n_freq, x, ldx, y, ldy, rows);
}

template <typename T>
class TriangleWaveEncoding final : public RowwiseEncoding<T> {
 public:
  TriangleWaveEncoding(uint32_t n_dims, uint32_t n_frequencies)
      : RowwiseEncoding<T>("TriangleWave", n_dims, n_dims * n_frequencies, false,
                           {{"otype", "TriangleWave"}, {"n_frequencies", n_frequencies}}),
        n_frequencies_(n_frequencies) {}

 protected:
  void encode_rows(const T* x, int64_t ldx, T* y, int64_t ldy, int64_t rows) const override {
    triangle_rows_dispatched(this->input_width(), n_frequencies_, x, ldx, y, ldy, rows);
  }
  void backward_rows(const T* x, int64_t ldx, const T* dL_dy, int64_t ldg, T* dx, int64_t ldd,
                     int64_t rows) const override {
    triangle_backward_dispatched(this->input_width(), n_frequencies_, x, ldx, dL_dy, ldg, dx, ldd, rows);
  }
  void encode_row(const T* x, T* y) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d) triangle_wave_encode(n_frequencies_, x[d], y + d * n_frequencies_);
  }
  void backward_row(const T* x, const T* dL_dy, T* dx) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d)
      dx[d] = triangle_wave_backward(n_frequencies_, x[d], dL_dy + d * n_frequencies_);
  }
  void jacobian_row(const T* x, const T* v, T* dy) const override {
    for (uint32_t d = 0; d < this->input_width(); ++d) triangle_wave_jacobian(n_frequencies_, x[d], v[d], dy + d * n_frequencies_);
  }
  // Piecewise linear: its Hessian is 0 almost everywhere (dx stays 0).
  void hessian_row(const T*, const T*, const T*, T*) const override {}

 private:
  uint32_t n_frequencies_;
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_triangle_wave_encoding(const TriangleWaveSpec& spec, uint32_t n_dims) {
  return std::make_unique<TriangleWaveEncoding<T>>(n_dims, spec.n_frequencies);
}

template std::unique_ptr<Encoding> make_triangle_wave_encoding<float>(const TriangleWaveSpec&, uint32_t);
template std::unique_ptr<Encoding> make_triangle_wave_encoding<double>(const TriangleWaveSpec&, uint32_t);

}  // namespace tinyfuse::cpu
