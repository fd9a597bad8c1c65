#include "cpu/encodings/triangle_wave.h"

#include "core/encodings/basic_config.h"
#include "core/encodings/triangle_wave_math.h"
#include "cpu/encodings/cpu_encoding.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class TriangleWaveEncoding final : public RowwiseEncoding<T> {
 public:
  TriangleWaveEncoding(uint32_t n_dims, uint32_t n_frequencies)
      : RowwiseEncoding<T>("TriangleWave", n_dims, n_dims * n_frequencies, false,
                           {{"otype", "TriangleWave"}, {"n_frequencies", n_frequencies}}),
        n_frequencies_(n_frequencies) {}

 protected:
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
