// W3's model, a NeRF field as instant-ngp builds it, composed from the library's objects: the
// position goes through a density network (HashGrid -> FullyFusedMLP, a NetworkWithInputEncoding),
// the direction through SphericalHarmonics; both write into one (batch, 32) buffer (the density
// network's 16 outputs, then the 16 harmonics) that the colour network reads.
// The library has no object that concatenates two objects' outputs: this one does it with column
// views of one buffer, which every part writes and reads in place (no copy pass).
#pragma once

#include <memory>

#include "tinyfuse/factory.h"

namespace tinyfuse::bench {

// config: {"density": {"n_output_dims", "encoding", "network"}, "direction_encoding": {...},
// "color_network": {...}} (configs/w3_nerf.json). Input (batch, 6): position (3), then direction
// (3, as (d + 1) / 2); output: the colour network's. Parameters: the density network's (its
// network, then its grid), then the colour network's.
std::unique_ptr<DifferentiableObject> make_nerf_field(const json& config, uint32_t n_output_dims,
                                                      const BuildOptions& options);

}  // namespace tinyfuse::bench
