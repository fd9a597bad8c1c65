// A network maps an input batch (batch, input_width) to (batch, padded_output_width).
#pragma once

#include "tinyfuse/activation.h"
#include "tinyfuse/object.h"

namespace tinyfuse {

class Network : public DifferentiableObject {
 public:
  virtual uint32_t n_hidden_layers() const = 0;
  // Width of layer i's output: i < n_hidden_layers() is a hidden layer, the last is the output.
  virtual uint32_t width(uint32_t layer) const = 0;
  // The input width must be a multiple of this (an encoding in front pads to it).
  virtual uint32_t required_input_alignment() const { return 1; }
  virtual Activation activation() const = 0;
  virtual Activation output_activation() const = 0;
  virtual bool has_biases() const = 0;
};

}  // namespace tinyfuse
