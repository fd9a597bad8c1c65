// An encoding followed by a network, as one differentiable object (tiny-cuda-nn's
// NetworkWithInputEncoding). Device-neutral: it only moves views between its two parts.
#pragma once

#include <memory>

#include "tinyfuse/encoding.h"
#include "tinyfuse/network.h"

namespace tinyfuse {

std::unique_ptr<DifferentiableObject> make_network_with_input_encoding(std::shared_ptr<Encoding> encoding,
                                                                       std::shared_ptr<Network> network);

// The network inside `object` when it is one make_network_with_input_encoding made; null otherwise.
const Network* network_inside(const DifferentiableObject& object);

}  // namespace tinyfuse
