#include "cuda/blaslt_library.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "tinyfuse/errors.h"

namespace tinyfuse::gpu {

namespace {

std::string default_library_name() {
  return "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
}

[[noreturn]] void unavailable(const std::string& what) {
  throw UnsupportedError("BlasLtMLP and BlasLtMLPFP16 need cuBLASLt, which could not be loaded: " + what +
                         ". Install it (the CUDA toolkit, or pip install nvidia-cublas) or point "
                         "TINYFUSE_CUBLASLT_LIBRARY at libcublasLt.so; FullyFusedMLP and PortableMLP run without it");
}

template <typename F>
void bind(void* lib, const char* name, F& fn, const std::string& path) {
  void* sym = dlsym(lib, name);
  if (!sym) unavailable(path + " has no " + name);
  fn = reinterpret_cast<F>(sym);
}

BlasLtApi load() {
  const char* env = std::getenv("TINYFUSE_CUBLASLT_LIBRARY");
  const std::string path = env && *env ? env : default_library_name();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    unavailable(path + ": " + (why ? why : "not found"));
  }
  BlasLtApi api{};
  bind(lib, "cublasLtCreate", api.create, path);
  bind(lib, "cublasLtDestroy", api.destroy, path);
  bind(lib, "cublasLtMatmulDescCreate", api.matmul_desc_create, path);
  bind(lib, "cublasLtMatmulDescDestroy", api.matmul_desc_destroy, path);
  bind(lib, "cublasLtMatmulDescSetAttribute", api.matmul_desc_set_attribute, path);
  bind(lib, "cublasLtMatrixLayoutCreate", api.matrix_layout_create, path);
  bind(lib, "cublasLtMatrixLayoutDestroy", api.matrix_layout_destroy, path);
  bind(lib, "cublasLtMatmulPreferenceCreate", api.matmul_preference_create, path);
  bind(lib, "cublasLtMatmulPreferenceDestroy", api.matmul_preference_destroy, path);
  bind(lib, "cublasLtMatmulPreferenceSetAttribute", api.matmul_preference_set_attribute, path);
  bind(lib, "cublasLtMatmulAlgoGetHeuristic", api.matmul_algo_get_heuristic, path);
  bind(lib, "cublasLtMatmul", api.matmul, path);
  bind(lib, "cublasLtGetStatusName", api.get_status_name, path);
  bind(lib, "cublasLtGetStatusString", api.get_status_string, path);
  return api;  // the library stays open for the process
}

}  // namespace

const BlasLtApi& blaslt_api() {
  // Loaded once (every BLAS-Lt call asks: one atomic load after that); a failure is not
  // remembered, so a later call (after the caller fixed the environment) tries again.
  static std::atomic<const BlasLtApi*> ready{nullptr};
  if (const BlasLtApi* api = ready.load(std::memory_order_acquire)) return *api;
  static std::mutex mutex;
  static BlasLtApi loaded{};
  std::lock_guard<std::mutex> lock(mutex);
  if (!ready.load(std::memory_order_relaxed)) {
    loaded = load();
    ready.store(&loaded, std::memory_order_release);
  }
  return loaded;
}

}  // namespace tinyfuse::gpu
