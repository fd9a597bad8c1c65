// The MLP's elementwise passes over rows of activations, written so that the compiler vectorises
// them, each compiled for several instruction sets with the best one the CPU has chosen when the
// library loads (elementwise.cpp). Operation by operation they compute what activation_math.h
// says, so results do not depend on the instruction set.
#pragma once

#include <cstdint>

#include "tinyfuse/activation.h"

namespace tinyfuse::cpu {

// Rows [r0, r1) of dense (rows, width) z and y: z += bias (per column; none when null), then
// y = act(z).
void bias_activate(Activation act, float* z, float* y, const float* bias, int64_t r0, int64_t r1, uint32_t width);
void bias_activate(Activation act, double* z, double* y, const double* bias, int64_t r0, int64_t r1, uint32_t width);

// Rows [r0, r1): dz = dy * act'(z), dy with leading dimension ldy, z and dz dense.
void activation_backward(Activation act, const float* dy, int64_t ldy, const float* z, float* dz, int64_t r0,
                         int64_t r1, uint32_t width);
void activation_backward(Activation act, const double* dy, int64_t ldy, const double* z, double* dz, int64_t r0,
                         int64_t r1, uint32_t width);

// The instruction set the dispatched passes run with here ("avx512f", "avx2" or "baseline").
const char* elementwise_isa();

}  // namespace tinyfuse::cpu
