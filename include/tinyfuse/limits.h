// The limits tinyfuse applies to what it is given, each checked before anything is built or
// allocated and refused with an error naming it (docs/ERRORS.md, "Limits"). Model sizes have no
// fixed limit: they are bounded by the memory the model will hold (the Trainer's memory plan).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tinyfuse {

// Arrays and objects nested in one JSON document: configs (text, files and json values handed to
// the factory), checkpoint headers and the JSON stored in them. tiny-cuda-nn configs nest 5 deep.
constexpr size_t kMaxJsonDepth = 64;

// Configs inside configs: every "nested" of a Composite encoding, a Composite / EMA /
// ExponentialDecay optimizer is one level.
constexpr size_t kMaxConfigNesting = 16;

// Encodings and optimizers one config describes, the nested ones included.
constexpr size_t kMaxConfigObjects = 1024;

// Bytes of a config file (tiny-cuda-nn's configs are a few hundred).
constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;

}  // namespace tinyfuse
