// An encoding followed by a network, as one differentiable object (tiny-cuda-nn's
// NetworkWithInputEncoding). Device-neutral: it only moves views between its two parts.
#pragma once

#include <memory>

#include "tinyfuse/encoding.h"
#include "tinyfuse/network.h"

namespace tinyfuse {

std::unique_ptr<DifferentiableObject> make_network_with_input_encoding(std::shared_ptr<Encoding> encoding,
                                                                       std::shared_ptr<Network> network);

// A network that can run an encoding inside its own inference pass (the CUDA FullyFusedMLP behind
// OneBlob on Hopper: fused/oneblob_input.h). NetworkWithInputEncoding::inference asks it first.
class FusesEncodingInference {
 public:
  virtual ~FusesEncodingInference() = default;
  // `encoding` then this network, from `input` into `output`, in one pass: true. False, with
  // nothing done, where the pair cannot (the caller then runs the encoding, then the network).
  // Bad arguments throw as the two calls would.
  virtual bool inference_through(const Encoding& encoding, const TensorView& input, const TensorView& output) = 0;
};

// The network inside `object` when it is one make_network_with_input_encoding made; null otherwise.
const Network* network_inside(const DifferentiableObject& object);

}  // namespace tinyfuse
