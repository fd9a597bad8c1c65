#include "cpu/encodings/empty.h"

#include "core/encodings/basic_config.h"
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
std::unique_ptr<Encoding> make_empty_encoding(const json& config, const std::string& path, uint32_t n_dims) {
  parse_empty_config(config, path);
  return std::make_unique<EmptyEncoding<T>>(n_dims);
}

template std::unique_ptr<Encoding> make_empty_encoding<float>(const json&, const std::string&, uint32_t);
template std::unique_ptr<Encoding> make_empty_encoding<double>(const json&, const std::string&, uint32_t);

}  // namespace tinyfuse::cpu
