#include "cpu/tiles/tile_gemm.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "tinyfuse/errors.h"

namespace tinyfuse::cpu {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
void tile_gemm_avx512(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t,
                      bool);
void tile_gemm_avx2(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t,
                    bool);

namespace {
const TileGemm kAvx512{"avx512f", tile_gemm_avx512};
const TileGemm kAvx2{"avx2", tile_gemm_avx2};
}  // namespace

const TileGemm* tile_gemm_for(const char* isa) {
  __builtin_cpu_init();
  if (std::strcmp(isa, "avx512f") == 0) return __builtin_cpu_supports("avx512f") ? &kAvx512 : nullptr;
  if (std::strcmp(isa, "avx2") == 0)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &kAvx2 : nullptr;
  return nullptr;
}
#else
const TileGemm* tile_gemm_for(const char*) { return nullptr; }
#endif

const TileGemm* tile_gemm() {
  static const TileGemm* const chosen = [] {
    const char* cap = std::getenv("TINYFUSE_CPU_ISA");
    const std::string limit = cap ? cap : "";
    if (!limit.empty() && limit != "avx512f" && limit != "avx2" && limit != "baseline")
      throw Error("TINYFUSE_CPU_ISA='" + limit + "': expected avx512f, avx2 or baseline (unset: the best this CPU has)");
    if (limit == "baseline") return static_cast<const TileGemm*>(nullptr);
    if (limit != "avx2")
      if (const TileGemm* k = tile_gemm_for("avx512f")) return k;
    return tile_gemm_for("avx2");
  }();
  return chosen;
}

}  // namespace tinyfuse::cpu
