#include "cpu/encodings/empty.h"

#include "cpu/encodings/cpu_encoding.h"

namespace tinyfuse::cpu {

namespace {

template <typename T>
class EmptyEncoding final : public RowwiseEncoding<T> {
 public:
  explicit EmptyEncoding(uint32_t n_dims) : RowwiseEncoding<T>("Empty", n_dims, 0, false, {{"otype", "Empty"}}) {}

 protected:
  void encode_row(const T*, T*) const override {}
  void backward_row(const T*, const T*, T*) const override {}  // dx stays 0
  void jacobian_row(const T*, const T*, T*) const override {}  // no features
  void hessian_row(const T*, const T*, const T*, T*) const override {}
};

}  // namespace

template <typename T>
std::unique_ptr<Encoding> make_empty_encoding(uint32_t n_dims) {
  return std::make_unique<EmptyEncoding<T>>(n_dims);
}

template std::unique_ptr<Encoding> make_empty_encoding<float>(uint32_t);
template std::unique_ptr<Encoding> make_empty_encoding<double>(uint32_t);

}  // namespace tinyfuse::cpu
