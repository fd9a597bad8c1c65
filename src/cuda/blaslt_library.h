// cuBLASLt opened at run time (dlopen), the first time a BLAS-Lt network is built, rather than
// linked: the library, the CLI and the Python package load and run (CPU backend, PortableMLP,
// FullyFusedMLP) on machines without it, and the BLAS-Lt otypes then say what is missing. CUDA
// builds only; gpu_runtime.h's gpublasLt* names call through this table.
#pragma once

#if !defined(TINYFUSE_WITH_HIP)
#include <cublasLt.h>

namespace tinyfuse::gpu {

struct BlasLtApi {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&cublasLtMatrixLayoutCreate) matrix_layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) matrix_layout_destroy;
  decltype(&cublasLtMatmulPreferenceCreate) matmul_preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) matmul_preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) matmul_preference_set_attribute;
  decltype(&cublasLtMatmulAlgoGetHeuristic) matmul_algo_get_heuristic;
  decltype(&cublasLtMatmul) matmul;
  decltype(&cublasLtGetStatusName) get_status_name;
  decltype(&cublasLtGetStatusString) get_status_string;
};

// The loaded library's entry points, opened once per process: from $TINYFUSE_CUBLASLT_LIBRARY when
// set, else by its soname (libcublasLt.so.<CUDA major>: the CUDA toolkit's, or the nvidia-cublas
// wheel's, which PyTorch has loaded already). Throws UnsupportedError naming the library, what the
// loader said and what would work where it cannot be opened.
const BlasLtApi& blaslt_api();

}  // namespace tinyfuse::gpu
#endif
