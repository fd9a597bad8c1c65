// Every otype tinyfuse knows (networks, encodings, losses, optimizers): which devices implement
// it, and which of those this build has. The one list the factory, the config readers and the
// backends consult. What the build has is read from its build macros (TINYFUSE_WITH_CUDA,
// TINYFUSE_WITH_WIDTH64_FUSED, TINYFUSE_WITH_HIPBLASLT), never from a backend header.
#pragma once

#include <string>
#include <vector>

#include "tinyfuse/common.h"

namespace tinyfuse {

enum class ObjectKind { Network, Encoding, Loss, Optimizer };

// A part of the GPU backend that a build may leave out.
enum class GpuPart {
  Always,         // in every build that has the GPU backend
  BlasLt,         // the vendor BLAS-Lt library (cuBLASLt in every CUDA build; hipBLASLt where found)
  Width64Fused,   // Width64FusedMLP's kernel (CMake option TINYFUSE_WIDTH64_FUSED)
};

struct OtypeEntry {
  ObjectKind kind;
  const char* name;  // canonical spelling (configs match it case-insensitively)
  bool cpu;          // the CPU backend implements it
  bool cuda;         // the GPU backend implements it ...
  GpuPart part;      // ... in builds that have this part
  const char* alias_of = nullptr;  // tiny-cuda-nn's other name for this otype
};

// In order: for losses and optimizers the order of LossKind and OptimizerKind.
const std::vector<OtypeEntry>& otype_table();

// The canonical names of one kind, in table order: what configs may name in every build.
std::vector<std::string> otype_names(ObjectKind kind);
// The otype `name` (a canonical name or an alias of `kind`) stands for: the alias's target, or
// `name` itself.
std::string canonical_otype(ObjectKind kind, const std::string& name);
// Whether this build has a backend for `device` at all, and if not, how to get one.
bool backend_built(Device device);
std::string backend_missing_reason(Device device);
// Whether this build runs `name` (a canonical name of `kind`) on `device`.
bool otype_built_on(ObjectKind kind, const std::string& name, Device device);
// The names this build runs on `device`, in table order.
std::vector<std::string> otype_names_built_on(ObjectKind kind, Device device);
// Why this build cannot run `name` on `device` and how to get it (a ConfigError rule); only
// meaningful where otype_built_on() is false.
std::string otype_unavailable_reason(ObjectKind kind, const std::string& name, Device device);

}  // namespace tinyfuse
