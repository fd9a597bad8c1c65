#include "tinyfuse/common.h"

#include "tinyfuse/errors.h"

namespace tinyfuse {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F64: return 8;
  }
  throw Error("unknown dtype");
}

std::string to_string(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

std::string to_string(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F64: return "f64";
  }
  return "?";
}

std::string to_string(GradientMode m) {
  switch (m) {
    case GradientMode::Ignore: return "Ignore";
    case GradientMode::Overwrite: return "Overwrite";
    case GradientMode::Accumulate: return "Accumulate";
  }
  return "?";
}

}  // namespace tinyfuse
