#include "cpu/encodings/spherical_harmonics.h"

#include "core/encodings/basic_config.h"
#include "core/encodings/spherical_harmonics_math.h"
#include "cpu/encodings/cpu_encoding.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class SphericalHarmonicsEncoding final : public RowwiseEncoding<T> {
 public:
  explicit SphericalHarmonicsEncoding(uint32_t degree)
      : RowwiseEncoding<T>("SphericalHarmonics", 3, degree * degree, /*pad_in_front=*/true,
                           {{"otype", "SphericalHarmonics"}, {"degree", degree}}),
        degree_(degree) {}

 protected:
  // tiny-cuda-nn reads its inputs as [0, 1]^3 and maps them to [-1, 1]^3.
  // The rows in one loop with the polynomial inlined (no call per row).
  void encode_rows(const T* u, int64_t ldu, T* y, int64_t ldy, int64_t rows) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* ur = u + r * ldu;
      sh_encode(degree_, ur[0] * T(2) - T(1), ur[1] * T(2) - T(1), ur[2] * T(2) - T(1), y + r * ldy);
    }
  }
  void backward_rows(const T* u, int64_t ldu, const T* dL_dy, int64_t ldg, T* du, int64_t ldd,
                     int64_t rows) const override {
    for (int64_t r = 0; r < rows; ++r) {
      const T* ur = u + r * ldu;
      T* dr = du + r * ldd;
      dr[0] = dr[1] = dr[2] = T(0);
      sh_backward(degree_, ur[0] * T(2) - T(1), ur[1] * T(2) - T(1), ur[2] * T(2) - T(1), dL_dy + r * ldg, dr);
      for (int d = 0; d < 3; ++d) dr[d] *= T(2);
    }
  }
  void encode_row(const T* u, T* y) const override {
    sh_encode(degree_, u[0] * T(2) - T(1), u[1] * T(2) - T(1), u[2] * T(2) - T(1), y);
  }
  void backward_row(const T* u, const T* dL_dy, T* du) const override {
    sh_backward(degree_, u[0] * T(2) - T(1), u[1] * T(2) - T(1), u[2] * T(2) - T(1), dL_dy, du);
    for (int d = 0; d < 3; ++d) du[d] *= T(2);
  }
  // Through x = 2u - 1: J_u = 2 J_x and H_u = 4 H_x, so both take the step 2v in x.
  void jacobian_row(const T* u, const T* v, T* dy) const override {
    const T vx[3] = {T(2) * v[0], T(2) * v[1], T(2) * v[2]};
    sh_jacobian(degree_, u[0] * T(2) - T(1), u[1] * T(2) - T(1), u[2] * T(2) - T(1), vx, dy);
  }
  void hessian_row(const T* u, const T* v, const T* dL_dy, T* du) const override {
    const T vx[3] = {T(2) * v[0], T(2) * v[1], T(2) * v[2]};
    sh_hessian(degree_, u[0] * T(2) - T(1), u[1] * T(2) - T(1), u[2] * T(2) - T(1), dL_dy, vx, du);
    for (int d = 0; d < 3; ++d) du[d] *= T(2);
  }

 private:
  uint32_t degree_;
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_spherical_harmonics_encoding(const SphericalHarmonicsSpec& spec) {
  return std::make_unique<SphericalHarmonicsEncoding<T>>(spec.degree);
}

template std::unique_ptr<Encoding> make_spherical_harmonics_encoding<float>(const SphericalHarmonicsSpec&);
template std::unique_ptr<Encoding> make_spherical_harmonics_encoding<double>(const SphericalHarmonicsSpec&);

}  // namespace tinyfuse::cpu
