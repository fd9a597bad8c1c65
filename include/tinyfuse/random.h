// PCG32 (O'Neill's permuted congruential generator, XSH-RR): small, fast and identical on every
// platform, so a seed gives the same initial parameters on every device and build. Seeded and
// drawn as tiny-cuda-nn's pcg32 (stream 1, 23-bit floats), so a seed gives tiny-cuda-nn's values.
#pragma once

#include <cstdint>
#include <cstring>

namespace tinyfuse {

class Pcg32 {
 public:
  explicit Pcg32(uint64_t seed = 0x853c49e6748fea9bULL, uint64_t stream = 1) {
    seed_with(seed, stream);
  }
  void seed_with(uint64_t seed, uint64_t stream = 1) {
    state_ = 0;
    inc_ = (stream << 1u) | 1u;
    next_uint();
    state_ += seed;
    next_uint();
  }
  uint32_t next_uint() {
    uint64_t old = state_;
    state_ = old * 6364136223846793005ULL + inc_;
    uint32_t xorshifted = static_cast<uint32_t>(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = static_cast<uint32_t>(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((~rot + 1u) & 31));
  }
  // Uniform in [0, 1) with 23 random bits (a float in [1, 2) minus 1).
  float next_float() {
    uint32_t bits = (next_uint() >> 9) | 0x3f800000u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f - 1.0f;
  }
  double next_double() {
    uint64_t hi = next_uint(), lo = next_uint();
    return static_cast<double>(((hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
  }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * next_float(); }

 private:
  uint64_t state_ = 0, inc_ = 0;
};

}  // namespace tinyfuse
