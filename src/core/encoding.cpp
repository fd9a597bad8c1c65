#include "tinyfuse/encoding.h"

namespace tinyfuse {

// Encodings that write one dtype only accept that one.
void Encoding::set_output_dtype(DType dtype) {
  if (dtype != output_dtype())
    throw UnsupportedError(name() + " on " + to_string(device()) + " writes " + to_string(output_dtype()) +
                           " features only, not " + to_string(dtype));
}

}  // namespace tinyfuse
