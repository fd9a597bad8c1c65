#include "core/otypes.h"

namespace tinyfuse {

namespace {

using K = ObjectKind;
using P = GpuPart;

bool part_built(GpuPart part) {
  switch (part) {
    case P::Always: return true;
#if defined(TINYFUSE_WITH_HIP)
    case P::BlasLt:
#if defined(TINYFUSE_WITH_HIPBLASLT)
      return true;
#else
      return false;
#endif
#else
    case P::BlasLt: return true;  // cuBLASLt comes with every CUDA toolkit
#endif
    case P::Width64Fused:
#if defined(TINYFUSE_WITH_WIDTH64_FUSED)
      return true;
#else
      return false;
#endif
  }
  return false;
}

const OtypeEntry* find(ObjectKind kind, const std::string& name) {
  for (const OtypeEntry& e : otype_table())
    if (e.kind == kind && name == e.name) return &e;
  return nullptr;
}

}  // namespace

const std::vector<OtypeEntry>& otype_table() {
  static const std::vector<OtypeEntry> table = {
      // kind, name, CPU backend, GPU backend, the GPU part it needs
      {K::Network, "PortableMLP", true, true, P::Always},
      {K::Network, "FullyFusedMLP", true, true, P::Always},
      {K::Network, "CutlassMLP", true, false, P::Always},
      {K::Network, "MLP", true, false, P::Always, "CutlassMLP"},
      {K::Network, "MegakernelMLP", true, true, P::Always, "FullyFusedMLP"},
      {K::Network, "BlasLtMLP", false, true, P::BlasLt},
      {K::Network, "BlasLtMLPFP16", false, true, P::BlasLt},
      {K::Network, "Width64FusedMLP", false, true, P::Width64Fused},
#if defined(TINYFUSE_WITH_HIP)
      // The names the AMD system tinyfuse re-builds gave these networks.
      {K::Network, "HipBLASLtMLP", false, true, P::BlasLt, "BlasLtMLP"},
      {K::Network, "HipBLASLtMLPFP16", false, true, P::BlasLt, "BlasLtMLPFP16"},
      {K::Network, "RocWMMAWidth64MLP", false, true, P::Width64Fused, "Width64FusedMLP"},
#endif

      {K::Encoding, "Identity", true, true, P::Always},
      {K::Encoding, "Grid", true, true, P::Always},
      {K::Encoding, "HashGrid", true, true, P::Always},
      {K::Encoding, "DenseGrid", true, true, P::Always},
      {K::Encoding, "TiledGrid", true, true, P::Always},
      {K::Encoding, "Frequency", true, true, P::Always},
      {K::Encoding, "TriangleWave", true, true, P::Always},
      {K::Encoding, "OneBlob", true, true, P::Always},
      {K::Encoding, "SphericalHarmonics", true, true, P::Always},
      {K::Encoding, "Empty", true, true, P::Always},
      {K::Encoding, "Composite", true, true, P::Always},
      {K::Encoding, "NRC", true, true, P::Always},
      {K::Encoding, "OneBlobFrequency", true, true, P::Always, "NRC"},

      // LossKind's order.
      {K::Loss, "L2", true, true, P::Always},
      {K::Loss, "L1", true, true, P::Always},
      {K::Loss, "RelativeL2", true, true, P::Always},
      {K::Loss, "RelativeL2Luminance", true, true, P::Always},
      {K::Loss, "RelativeL1", true, true, P::Always},
      {K::Loss, "MAPE", true, true, P::Always},
      {K::Loss, "SMAPE", true, true, P::Always},
      {K::Loss, "CrossEntropy", true, true, P::Always},
      {K::Loss, "Variance", true, true, P::Always},

      // OptimizerKind's order.
      {K::Optimizer, "Adam", true, true, P::Always},
      {K::Optimizer, "SGD", true, true, P::Always},
      {K::Optimizer, "ExponentialDecay", true, true, P::Always},
      {K::Optimizer, "EMA", true, true, P::Always},
      {K::Optimizer, "Composite", true, true, P::Always},
  };
  return table;
}

std::string canonical_otype(ObjectKind kind, const std::string& name) {
  const OtypeEntry* e = find(kind, name);
  return e && e->alias_of ? e->alias_of : name;
}

std::vector<std::string> otype_names(ObjectKind kind) {
  std::vector<std::string> out;
  for (const OtypeEntry& e : otype_table())
    if (e.kind == kind) out.push_back(e.name);
  return out;
}

bool backend_built(Device device) {
#if defined(TINYFUSE_WITH_CUDA)
  return device == Device::CPU || device == Device::CUDA;
#else
  return device == Device::CPU;
#endif
}

std::string backend_missing_reason(Device) {
  // Every build has the CPU backend: CUDA is the one a build may lack.
  return "this build has no CUDA backend (configure with -DTINYFUSE_CUDA=ON)";
}

bool otype_built_on(ObjectKind kind, const std::string& name, Device device) {
  const OtypeEntry* e = find(kind, name);
  if (!e || !backend_built(device)) return false;
  return device == Device::CPU ? e->cpu : e->cuda && part_built(e->part);
}

std::vector<std::string> otype_names_built_on(ObjectKind kind, Device device) {
  std::vector<std::string> out;
  for (const OtypeEntry& e : otype_table())
    if (e.kind == kind && otype_built_on(kind, e.name, device)) out.push_back(e.name);
  return out;
}

std::string otype_unavailable_reason(ObjectKind kind, const std::string& name, Device device) {
  const OtypeEntry* e = find(kind, name);
  if (device == Device::CPU) return name + " runs only on CUDA devices";
  // A part left out by an option is named even without a GPU backend: the option needs both.
  if (e && e->cuda && e->part == GpuPart::Width64Fused && !part_built(e->part))
    return name + " is not built into this library (configure with -DTINYFUSE_CUDA=ON -DTINYFUSE_WIDTH64_FUSED=ON)";
#if defined(TINYFUSE_WITH_HIP)
  // A HIP build without hipBLASLt: say that before anything about the backend.
  if (e && e->cuda && e->part == GpuPart::BlasLt && !part_built(e->part))
    return name + " needs hipBLASLt, which this HIP build did not find (install ROCm's hipBLASLt and reconfigure); "
                  "FullyFusedMLP and PortableMLP need no BLAS-Lt library";
#endif
  if (!backend_built(device)) return backend_missing_reason(device);
  if (e && e->cuda && !part_built(e->part)) return name + " needs the vendor BLAS-Lt library, which this build did not find";
  return name + " has no CUDA implementation in this version";
}

}  // namespace tinyfuse
